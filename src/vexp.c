/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vexp.c -- the SIMD levels of the element-wise softmax operations (see
 * vexp.h) and the run-time choice between them.
 *
 * Each level is vexp_impl.h compiled inside a `#pragma GCC target` region;
 * the best level the CPU supports is used unless ULY_ISA (environment:
 * avx512, avx2, baseline or auto) or uly_kernel_set_isa() selects another.
 * The levels give identical bits (tests/test_blocked.c forces each one).
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "vexp.h"

#if defined(__GNUC__) && !defined(__clang__)
/* The vectors live in registers of the functions below and of the inlined
 * helpers only; none crosses a call. */
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

#if defined(__x86_64__) && defined(__GNUC__) && !defined(ULY_NO_CLONES)
#define ULY_HAVE_LEVELS 1
#include <immintrin.h>
#endif

/* VLEVEL: which max/min instructions vexp_impl.h may use (0: none). */
#define VL 8
#define VLEVEL 0
#define VSFX(n) uly_vx_base_##n
#include "vexp_impl.h"
#undef VL
#undef VLEVEL
#undef VSFX

#ifdef ULY_HAVE_LEVELS
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#define VL 8
#define VLEVEL 1
#define VSFX(n) uly_vx_avx2_##n
#include "vexp_impl.h"
#undef VL
#undef VLEVEL
#undef VSFX
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f,avx512dq,avx512bw,avx512vl,fma")
#define VL 16
#define VLEVEL 2
#define VSFX(n) uly_vx_avx512_##n
#include "vexp_impl.h"
#undef VL
#undef VLEVEL
#undef VSFX
#pragma GCC pop_options
#endif

static const uly_vops levels[ULY_ISA_COUNT] = {
    {ULY_ISA_BASELINE, uly_vx_base_row_max, uly_vx_base_exp2_shift_sum, uly_vx_base_exp2_shift_sum_to, uly_vx_base_ds_row, uly_vx_base_exp2_ds_row},
#ifdef ULY_HAVE_LEVELS
    {ULY_ISA_AVX2, uly_vx_avx2_row_max, uly_vx_avx2_exp2_shift_sum, uly_vx_avx2_exp2_shift_sum_to, uly_vx_avx2_ds_row, uly_vx_avx2_exp2_ds_row},
    {ULY_ISA_AVX512, uly_vx_avx512_row_max, uly_vx_avx512_exp2_shift_sum, uly_vx_avx512_exp2_shift_sum_to, uly_vx_avx512_ds_row, uly_vx_avx512_exp2_ds_row},
#endif
};

static const char *const isa_names[ULY_ISA_COUNT] = {"baseline", "avx2", "avx512"};

const char *uly_isa_name(int isa)
{
    return isa >= 0 && isa < ULY_ISA_COUNT ? isa_names[isa] : "unknown";
}

/* Whether this build and this CPU can run a level. */
static int isa_supported(int isa)
{
    if (isa == ULY_ISA_BASELINE)
        return 1;
#ifdef ULY_HAVE_LEVELS
    __builtin_cpu_init();
    if (isa == ULY_ISA_AVX2)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (isa == ULY_ISA_AVX512)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("fma");
#endif
    return 0;
}

static int isa_best(void)
{
    for (int isa = ULY_ISA_COUNT - 1; isa > 0; isa--)
        if (isa_supported(isa))
            return isa;
    return ULY_ISA_BASELINE;
}

/* "auto" -> -1; a level -> its number; unknown -> -2. */
static int isa_parse(const char *name)
{
    if (!strcmp(name, "auto"))
        return -1;
    for (int isa = 0; isa < ULY_ISA_COUNT; isa++)
        if (!strcmp(name, isa_names[isa]))
            return isa;
    return -2;
}

/* The active level + 1 (0: not chosen yet). */
static atomic_int active;

const uly_vops *uly_vops_level(int isa)
{
    return isa >= 0 && isa < ULY_ISA_COUNT && isa_supported(isa) ? &levels[isa] : NULL;
}

int uly_vops_current(const uly_vops **out)
{
    int a = atomic_load_explicit(&active, memory_order_relaxed);
    if (a == 0) {
        /* ULY_ISA chooses if set; otherwise the best level of this CPU */
        const char *env = getenv("ULY_ISA");
        int isa = env && *env ? isa_parse(env) : -1;
        if (isa == -2)
            return uly_set_error(ULY_EINVAL, "ULY_ISA='%s' is not a SIMD level (avx512, avx2, baseline or auto)",
                                 env);
        if (isa >= 0 && !isa_supported(isa))
            return uly_set_error(ULY_EINVAL, "ULY_ISA=%s: this CPU or build does not support it", env);
        if (isa < 0)
            isa = isa_best();
        a = isa + 1;
        atomic_store_explicit(&active, a, memory_order_relaxed);
    }
    *out = &levels[a - 1];
    return ULY_OK;
}

const char *uly_kernel_isa(void)
{
    const uly_vops *v = NULL;
    return uly_vops_current(&v) ? "invalid (see ULY_ISA)" : uly_isa_name(v->isa);
}

int uly_kernel_set_isa(const char *name)
{
    int isa = name ? isa_parse(name) : -2;
    if (isa == -2)
        return uly_set_error(ULY_EINVAL, "unknown SIMD level '%s' (avx512, avx2, baseline or auto)",
                             name ? name : "(null)");
    if (isa == -1)
        isa = isa_best();
    if (!isa_supported(isa))
        return uly_set_error(ULY_EINVAL, "SIMD level %s is not supported by this CPU or build",
                             isa_names[isa]);
    atomic_store_explicit(&active, isa + 1, memory_order_relaxed);
    return ULY_OK;
}
