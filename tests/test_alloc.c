/* SPDX-License-Identifier: Apache-2.0 */
/* test_alloc.c -- allocation failure along the library's main paths: make
 * the k-th allocation fail for every k and check that each call returns
 * ULY_ENOMEM with a message, touches nothing it should not, and leaks
 * nothing (leaks are caught by the sanitizer build and `make check-valgrind`). */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <stdio.h>

#include "testutil.h"

/* Fault injection hooks of src/error.c (exported for tests, not in the API). */
void uly_test_fail_alloc_at(long k);
long uly_test_alloc_count(void);
uint64_t uly_test_alloc_bytes(void);

typedef int (*call_fn)(void *ctx);

/* Run fn once to count its allocations, then fail each one in turn. */
static void every_allocation_fails(const char *what, call_fn fn, void *ctx)
{
    uly_test_fail_alloc_at(0);
    ck_assert_int_eq(fn(ctx), ULY_OK);
    long n = uly_test_alloc_count();
    ck_assert_msg(n > 0, "%s: allocates nothing?", what);
    for (long k = 1; k <= n; k++) {
        uly_test_fail_alloc_at(k);
        int rc = fn(ctx);
        uly_test_fail_alloc_at(0);
        ck_assert_msg(rc == ULY_ENOMEM, "%s: allocation %ld of %ld failed but the call returned %d (%s)", what, k,
                      n, rc, uly_strerror(rc));
        ck_assert_msg(strlen(uly_last_error()) > 0, "%s: no message for allocation %ld", what, k);
    }
    ck_assert_int_eq(fn(ctx), ULY_OK); /* and it still works afterwards */
}

typedef struct ctx {
    uly_attn_desc a;
    tu_problem p;
    void *q, *k, *v, *dout, *o, *lse, *dq, *dk, *dv;
    double *ro, *rl, *rdq, *rdk, *rdv;
    unsigned char *npy;
    size_t npy_len;
} ctx;

static void ctx_init(ctx *c, uly_dtype t)
{
    memset(c, 0, sizeof *c);
    c->a.batch = 2; c->a.seq = 19; c->a.heads = 4; c->a.kv_heads = 2; c->a.head_dim = 8;
    c->a.causal = 1; c->a.dtype = t;
    tu_problem_init(&c->p, &c->a, 3);
    size_t es = uly_dtype_size(t);
    c->q = malloc(c->p.nq * es); c->k = malloc(c->p.nkv * es); c->v = malloc(c->p.nkv * es);
    c->dout = malloc(c->p.nq * es); c->o = malloc(c->p.nq * es); c->lse = malloc(c->p.nlse * es);
    c->dq = malloc(c->p.nq * es); c->dk = malloc(c->p.nkv * es); c->dv = malloc(c->p.nkv * es);
    tu_convert(c->p.q, c->q, c->p.nq, t); tu_convert(c->p.k, c->k, c->p.nkv, t);
    tu_convert(c->p.v, c->v, c->p.nkv, t); tu_convert(c->p.dout, c->dout, c->p.nq, t);
    c->ro = malloc(c->p.nq * 8); c->rl = malloc(c->p.nlse * 8); c->rdq = malloc(c->p.nq * 8);
    c->rdk = malloc(c->p.nkv * 8); c->rdv = malloc(c->p.nkv * 8);
}

static void ctx_free(ctx *c)
{
    free(c->q); free(c->k); free(c->v); free(c->dout); free(c->o); free(c->lse);
    free(c->dq); free(c->dk); free(c->dv);
    free(c->ro); free(c->rl); free(c->rdq); free(c->rdk); free(c->rdv);
    free(c->npy);
    tu_problem_free(&c->p);
}

static int call_fwd(void *x)
{
    ctx *c = x;
    uly_kernel_opts o;
    memset(&o, 0, sizeof o);
    o.threads = 2;
    return uly_attn_fwd(&c->a, &o, c->q, c->k, c->v, c->o, c->lse);
}

static int call_bwd(void *x)
{
    ctx *c = x;
    return uly_attn_bwd(&c->a, NULL, c->q, c->k, c->v, c->o, c->lse, c->dout, c->dq, c->dk, c->dv);
}

static int call_ref_fwd(void *x)
{
    ctx *c = x;
    uly_attn_desc a = c->a;
    a.dtype = ULY_F64;
    return uly_ref_fwd(&a, c->p.q, c->p.k, c->p.v, c->ro, c->rl);
}

static int call_ref_bwd(void *x)
{
    ctx *c = x;
    uly_attn_desc a = c->a;
    a.dtype = ULY_F64;
    return uly_ref_bwd(&a, c->p.q, c->p.k, c->p.v, c->p.dout, c->rdq, c->rdk, c->rdv);
}

static int call_npy_parse(void *x)
{
    ctx *c = x;
    uly_npy n;
    int rc = uly_npy_parse(c->npy, c->npy_len, &n);
    if (rc == ULY_OK)
        uly_npy_free(&n);
    return rc;
}

START_TEST(kernels_f32)
{
    ctx c;
    ctx_init(&c, ULY_F32);
    every_allocation_fails("blocked forward f32", call_fwd, &c);
    every_allocation_fails("blocked backward f32", call_bwd, &c);
    ctx_free(&c);
}
END_TEST

START_TEST(kernels_f64_and_reference)
{
    ctx c;
    ctx_init(&c, ULY_F64);
    every_allocation_fails("blocked forward f64", call_fwd, &c);
    every_allocation_fails("blocked backward f64", call_bwd, &c);
    every_allocation_fails("reference forward", call_ref_fwd, &c);
    every_allocation_fails("reference backward", call_ref_bwd, &c);
    ctx_free(&c);
}
END_TEST

START_TEST(npy_read_and_parse)
{
    ctx c;
    ctx_init(&c, ULY_F32);
    char path[] = "/tmp/uly_alloc_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    int64_t shape[4] = {2, 19, 4, 8};
    ck_assert_int_eq(uly_npy_write(path, ULY_F32, 4, shape, c.q), ULY_OK);
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    c.npy = malloc(1 << 16);
    c.npy_len = fread(c.npy, 1, 1 << 16, f);
    fclose(f);
    remove(path);
    every_allocation_fails("npy parse", call_npy_parse, &c);
    ctx_free(&c);
}
END_TEST

/* The byte counter: what each hook was asked for, reset by reading; a
 * failed (injected) allocation and a zero-byte one count nothing. */
START_TEST(alloc_bytes_counter)
{
    uly_test_fail_alloc_at(0);
    uly_test_alloc_bytes();
    ck_assert_uint_eq(uly_test_alloc_bytes(), 0);
    void *a = uly_malloc(100), *b = uly_calloc(3, 7), *z = uly_malloc(0);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_ptr_nonnull(z);
    ck_assert_uint_eq(uly_test_alloc_bytes(), 121);
    ck_assert_uint_eq(uly_test_alloc_bytes(), 0);
    uly_test_fail_alloc_at(1);
    ck_assert_ptr_null(uly_malloc(4096));
    uly_test_fail_alloc_at(0);
    ck_assert_uint_eq(uly_test_alloc_bytes(), 0);
    void *c = uly_calloc(SIZE_MAX / 2, 0);
    ck_assert_ptr_nonnull(c);
    ck_assert_uint_eq(uly_test_alloc_bytes(), 0);
    uly_free(a); uly_free(b); uly_free(z); uly_free(c);
}
END_TEST

/* Live and peak heap bytes: every block counts at least what was asked
 * and at most that plus glibc's rounding (< 24 bytes from its heap, < a
 * 4 KiB page for a mapped block: 4112 bounds both); freeing everything returns live to where it was,
 * exactly; the peak is the largest live value.  From many OpenMP threads
 * at once, 8 x 2000 allocations and frees leave live exactly where it was
 * (a lost update of a non-atomic counter would not) and the peak covers
 * at least one thread's largest block. */
START_TEST(heap_live_and_peak)
{
    uint64_t live0, peak, live;
    if (uly_heap_usage(&live0, &peak) != ULY_OK) {
        printf("heap_live_and_peak: no malloc_usable_size in this C library: skipped\n");
        return;
    }
    ck_assert_uint_ge(peak, live0);
    uly_heap_reset_peak();
    uly_heap_usage(&live, &peak);
    ck_assert_uint_eq(peak, live0);
    void *a = uly_malloc(1000);
    uly_heap_usage(&live, NULL);
    ck_assert_uint_ge(live - live0, 1000);
    ck_assert_uint_le(live - live0, 1000 + 4112);
    void *b = uly_calloc(1000, 300); /* 300 000 bytes: mapped by glibc's default threshold */
    uint64_t live2;
    uly_heap_usage(&live2, NULL);
    ck_assert_uint_ge(live2 - live, 300000);
    ck_assert_uint_le(live2 - live, 300000 + 4112);
    uly_free(b);
    uly_heap_usage(&live2, &peak);
    ck_assert_uint_eq(live2, live);
    ck_assert_uint_ge(peak - live0, 301000);
    uly_heap_reset_peak();
    uly_free(a);
    uly_heap_usage(&live, &peak);
    ck_assert_uint_eq(live, live0);
    ck_assert_uint_ge(peak - live0, 1000);
    ck_assert_uint_le(peak - live0, 1000 + 4112);
    /* a block held across the threads' work keeps live far from 0, where the counter stops
     * (a lost update would otherwise hide there) */
    void *hold = uly_malloc(1 << 20);
    uly_heap_usage(&live0, NULL);
    uly_heap_reset_peak();
#ifdef _OPENMP
#pragma omp parallel for num_threads(8) schedule(static)
#endif
    for (int t = 0; t < 8; t++)
        for (int i = 0; i < 2000; i++) {
            void *p = uly_malloc((size_t)(16 + (i * 37 + t * 101) % 5000));
            uly_free(p);
        }
    uly_heap_usage(&live, &peak);
    ck_assert_uint_eq(live, live0);
    /* the largest block, 16 + 4999 bytes ((i * 37 + t * 101) % 5000 reaches 4999: 37 i covers every
     * residue), was live at some moment; at most one block per thread is live at once */
    ck_assert_uint_ge(peak - live0, 16 + 4999);
    ck_assert_uint_le(peak - live0, 8 * (16 + 4999 + 4112));
    uly_free(hold);
}
END_TEST

static Suite *make_alloc_suite(void)
{
    Suite *s = suite_create("alloc");
    TCase *tc = tcase_create("every_k");
    tcase_add_test(tc, kernels_f32);
    tcase_add_test(tc, kernels_f64_and_reference);
    tcase_add_test(tc, npy_read_and_parse);
    tcase_add_test(tc, alloc_bytes_counter);
    tcase_add_test(tc, heap_live_and_peak);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(make_alloc_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
