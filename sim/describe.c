/* SPDX-License-Identifier: Apache-2.0 */
/*
 * describe.c -- platform and model descriptions: JSON loaders with located
 * errors, preset lookup, dtype names, parameter counts.
 */
#define _POSIX_C_SOURCE 200809L   /* stat */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/base.h"

#include "usim.h"
#include "usim_internal.h"
#include "jsonutil.h"
#include "hfconfig.h"

#ifndef USIM_SRC_PRESETS
#define USIM_SRC_PRESETS ""
#endif
#ifndef USIM_DATA_PRESETS
#define USIM_DATA_PRESETS ""
#endif

/* ----------------------------------------------------------------- presets */

const char *const *usim_preset_dirs(void)
{
    static const char *dirs[4];
    int n = 0;
    const char *env = getenv("ULYSSES_SIM_PRESETS");
    if (env && *env)
        dirs[n++] = env;
    if (*USIM_SRC_PRESETS)
        dirs[n++] = USIM_SRC_PRESETS;
    if (*USIM_DATA_PRESETS)
        dirs[n++] = USIM_DATA_PRESETS;
    dirs[n] = NULL;
    return dirs;
}

static int is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

int usim_preset_path(const char *kind, const char *name, char *out, size_t outlen)
{
    size_t nl = strlen(name);
    int pathlike = strchr(name, '/') != NULL || (nl > 5 && strcmp(name + nl - 5, ".json") == 0);
    if (pathlike) {
        if ((size_t)snprintf(out, outlen, "%s", name) >= outlen)
            return usim_set_error(USIM_EINVAL, "path too long: %s", name);
        /* a path names what is there: missing, or a directory, FIFO or
         * device (which the reader refuses by name too) */
        struct stat st;
        if (stat(out, &st) != 0)
            return errno == ENOENT ? usim_set_error(USIM_ENOTFOUND, "%s: no such file", name)
                                   : usim_set_error(USIM_EIO, "%s: %s", name, strerror(errno));
        if (!S_ISREG(st.st_mode))
            return usim_set_error(USIM_EINVAL, "%s: is %s, not a regular file (a JSON description)", name,
                                  uly_file_kind(st.st_mode));
        return USIM_OK;
    }
    for (const char *const *d = usim_preset_dirs(); *d; d++) {
        if ((size_t)snprintf(out, outlen, "%s/%s/%s.json", *d, kind, name) >= outlen)
            continue;
        if (is_file(out))
            return USIM_OK;
    }
    return usim_set_error(USIM_ENOTFOUND,
                          "unknown %s preset '%s' (see 'ulysses-sim presets', or give a .json file)",
                          strcmp(kind, "platforms") == 0 ? "platform" : "model", name);
}

/* ---------------------------------------------------------------- platform */

/*
 * Every key a platform file may hold (doc/simulator.md documents each), in
 * the order they are read: where it sits, what it is, its range, its default
 * and where it goes in usim_platform, in which unit.  Parse, range checks,
 * messages and the list of valid keys (any other key is an error naming the
 * nearest) all come from this one table; the checks that involve several
 * keys and the defaults that derive from other keys follow it.
 */
enum { K_OBJ, K_DOC, K_STR, K_NUM, K_INT, K_BOOL };       /* K_DOC: any value, not read */
enum { U_ONE, U_TERA, U_GIB, U_GIGA, U_GBIT, U_US_PS, U_US_S }; /* file unit -> platform unit */
enum { T_ANY, T_SWITCH, T_MESH };                         /* the intra-node topology a key belongs to */

typedef struct pkey {
    const char *sect, *name;    /* sect: "" at the top, else the object holding the key */
    int kind, required;
    double lo;                  /* numbers: > lo (strict) or >= lo; integers: >= lo */
    int strict;
    double hi;                  /* 0: none, else at most hi (checked after every key is read) */
    int late;                   /* order of that check among the checks after reading (1, 2, ...) */
    double def;                 /* default of a number, integer or boolean (file units) */
    const char *sdef;           /* default of a string */
    int unit;
    size_t off;                 /* where it goes in usim_platform (objects, K_DOC: nowhere) */
    int64_t clamp;              /* integers: values above it are taken as it (0: none) */
    int (*choice)(const char *s, int *v);  /* strings: the accepted values */
    const char *choices;        /* ... as the message names them */
    int topo;                   /* T_SWITCH / T_MESH: only on that topology */
    const char *elsewhere;      /* the message when given on the other one */
} pkey;

static int topo_choice(const char *s, int *v)
{
    *v = strcmp(s, "full_mesh") == 0 ? 1 : 0;
    return strcmp(s, "switch") != 0 && !*v;
}
static int algo_any(const char *s, int *v)
{
    usim_algo a = USIM_ALGO_AUTO;
    int rc = usim_algo_parse(s, &a);
    *v = (int)a;
    return rc;
}
static int algo_no_tree(const char *s, int *v)   /* tree all-reduce only */
{
    return algo_any(s, v) || *v == USIM_ALGO_TREE;
}
static int proto_choice(const char *s, int *v)
{
    usim_proto q = USIM_PROTO_AUTO;
    int rc = usim_proto_parse(s, &q);
    *v = (int)q;
    return rc;
}
_Static_assert(sizeof(usim_algo) == sizeof(int) && sizeof(usim_proto) == sizeof(int), "enums stored as int");

#define KEY(s, n, k) .sect = s, .name = n, .kind = k
#define REQ .required = 1
#define AT(field) offsetof(usim_platform, field)
#define EFF .lo = 0, .strict = 1, .hi = 1       /* a fraction in (0, 1] */
#define POS .lo = 0, .strict = 1                /* > 0 */
#define ALGO(key, field, parse, names, order) \
    {KEY("collectives", key, K_STR), .sdef = "auto", .off = AT(field), .choice = parse, .choices = names, .late = order}

static const pkey pkeys[] = {
    {KEY("", "name", K_STR), REQ, .off = AT(name)},
    {KEY("", "description", K_DOC)}, {KEY("", "sources", K_DOC)}, {KEY("", "calibration", K_DOC)},
    {KEY("", "gpus_per_node", K_INT), REQ, .lo = 1, .hi = 4096, .late = 11, .off = AT(gpus_per_node)},
    {KEY("", "max_nodes", K_INT), .off = AT(max_nodes), .clamp = 1000000},
    {KEY("", "gpu", K_OBJ), REQ},
    {KEY("gpu", "model", K_DOC)},
    {KEY("gpu", "peak_tflops_bf16", K_NUM), REQ, POS, .unit = U_TERA, .off = AT(peak_flops[USIM_BF16])},
    {KEY("gpu", "peak_tflops_fp16", K_NUM), POS, .unit = U_TERA, .off = AT(peak_flops[USIM_FP16])},  /* 0: bf16 */
    {KEY("gpu", "peak_tflops_fp32", K_NUM), POS, .unit = U_TERA, .off = AT(peak_flops[USIM_FP32])},  /* 0: bf16/16 */
    {KEY("gpu", "gemm_efficiency", K_NUM), REQ, EFF, .late = 6, .off = AT(gemm_eff)},
    {KEY("gpu", "attention_efficiency", K_NUM), REQ, EFF, .late = 7, .off = AT(attn_eff)},
    {KEY("gpu", "attention_bwd_efficiency", K_NUM), EFF, .late = 8, .off = AT(attn_bwd_eff)},   /* 0: attn_eff */
    {KEY("gpu", "attention_skips_masked_blocks", K_BOOL), .def = 1, .off = AT(attn_causal_skip)},
    {KEY("gpu", "hbm_GiB", K_NUM), REQ, POS, .unit = U_GIB, .off = AT(hbm_bytes)},
    {KEY("gpu", "hbm_bw_GBps", K_NUM), REQ, POS, .unit = U_GIGA, .off = AT(hbm_Bps)},
    {KEY("gpu", "reserved_GiB", K_NUM), .unit = U_GIB, .off = AT(reserved_bytes)},
    {KEY("gpu", "sms", K_INT), .off = AT(sms), .clamp = 100000},
    {KEY("gpu", "gemm_tile_m", K_NUM), .lo = 1, .def = 128, .off = AT(gemm_tile_m)},
    {KEY("gpu", "gemm_tile_n", K_NUM), .lo = 1, .def = 128, .off = AT(gemm_tile_n)},
    {KEY("gpu", "gemm_k_half", K_NUM), .off = AT(gemm_k_half)},
    {KEY("gpu", "attention_head_dim_half", K_NUM), .off = AT(attn_d_half)},
    {KEY("gpu", "launch_us", K_NUM), .unit = U_US_S, .off = AT(launch_s)},
    {KEY("", "intra_node", K_OBJ), REQ},
    {KEY("intra_node", "fabric", K_DOC)},
    {KEY("intra_node", "topology", K_STR), .sdef = "switch", .off = AT(full_mesh), .choice = topo_choice,
     .choices = "\"switch\" or \"full_mesh\""},
    {KEY("intra_node", "bw_GBps_per_dir", K_NUM), REQ, POS, .unit = U_GIGA, .off = AT(nvl_peak_Bps), .topo = T_SWITCH,
     .elsewhere = "a full_mesh node gives link_bw_GBps_per_dir (one peer link) instead; the GPU's total is "
                  "(gpus_per_node - 1) times it"},
    {KEY("intra_node", "link_bw_GBps_per_dir", K_NUM), REQ, POS, .unit = U_GIGA, .off = AT(mesh_link_peak_Bps),
     .topo = T_MESH, .elsewhere = "only for \"topology\": \"full_mesh\" (a switched node gives bw_GBps_per_dir)"},
    {KEY("intra_node", "nvlink_domain_gpus", K_INT), .lo = 1, .off = AT(nvl_domain)},   /* 0: the node */
    {KEY("intra_node", "efficiency", K_NUM), EFF, .late = 9, .def = 1, .off = AT(nvl_eff)},
    {KEY("intra_node", "latency_us", K_NUM), REQ, .unit = U_US_PS, .off = AT(nvl_lat)},
    {KEY("intra_node", "a2a_call_us", K_NUM), .unit = U_US_PS, .off = AT(a2a_call[USIM_CLASS_NVLINK])},
    {KEY("intra_node", "nccl_latency_scale", K_NUM), POS, .hi = 100, .def = 1,
     .off = AT(nccl_lat_scale[USIM_CLASS_NVLINK])},
    {KEY("intra_node", "nvls", K_BOOL), .off = AT(nvls)},
    {KEY("intra_node", "nvls_efficiency", K_NUM), EFF, .late = 5, .def = 0.85, .off = AT(nvls_eff)},
    {KEY("", "inter_node", K_OBJ), REQ},
    {KEY("inter_node", "fabric", K_DOC)},
    {KEY("inter_node", "nic_bw_Gbps", K_NUM), REQ, POS, .unit = U_GBIT, .off = AT(nic_peak_Bps)},
    {KEY("inter_node", "nics_per_node", K_INT), .lo = 1, .off = AT(nics_per_node)},   /* 0: one per GPU */
    {KEY("inter_node", "efficiency", K_NUM), EFF, .late = 10, .def = 1, .off = AT(nic_eff)},
    {KEY("inter_node", "latency_us", K_NUM), REQ, .unit = U_US_PS, .off = AT(nic_lat)},
    {KEY("inter_node", "a2a_call_us", K_NUM), .unit = U_US_PS, .off = AT(a2a_call[USIM_CLASS_NIC])},
    {KEY("inter_node", "nccl_latency_scale", K_NUM), POS, .hi = 100, .def = 1,
     .off = AT(nccl_lat_scale[USIM_CLASS_NIC])},
    {KEY("inter_node", "spine_oversubscription", K_NUM), .lo = 1, .def = 1, .off = AT(oversub)},
    {KEY("", "collectives", K_OBJ)},
    ALGO("all_reduce", algo_allreduce, algo_any, "auto, ring, tree or nvls", 1),
    ALGO("all_gather", algo_allgather, algo_no_tree, "auto, ring or nvls", 2),
    ALGO("reduce_scatter", algo_reduce_scatter, algo_no_tree, "auto, ring or nvls", 3),
    ALGO("protocol", proto, proto_choice, "auto, LL, LL128 or Simple", 4),
    /* the host: offload of activations, optimizer and parameters (optional) */
    {KEY("", "host", K_OBJ)},
    {KEY("host", "cpu", K_DOC)}, {KEY("host", "link", K_DOC)},
    {KEY("host", "memory_GiB", K_NUM), REQ, POS, .unit = U_GIB, .off = AT(host_bytes)},
    {KEY("host", "link_bw_GBps_per_dir", K_NUM), REQ, POS, .unit = U_GIGA, .off = AT(host_link_peak_Bps)},
    {KEY("host", "link_efficiency", K_NUM), EFF, .late = 12, .def = 1, .off = AT(host_link_eff)},
    {KEY("host", "cores", K_INT), .lo = 1, .off = AT(host_cores), .clamp = 1000000},
    {KEY("host", "cpu_peak_tflops_fp32", K_NUM), POS, .unit = U_TERA, .off = AT(host_flops)},
    {KEY("host", "cpu_efficiency", K_NUM), EFF, .late = 13, .def = 1, .off = AT(host_cpu_eff)},
    {KEY("host", "mem_bw_GBps", K_NUM), POS, .unit = U_GIGA, .off = AT(host_mem_Bps)},
};
enum { NPKEY = (int)(sizeof pkeys / sizeof pkeys[0]) };

/* A value as the file gives it (or its default). */
typedef struct pval {
    double d;
    int64_t i;
    const char *s;
    int choice;
} pval;

static int pkey_find(const char *sect, const char *name)
{
    for (int k = 0; k < NPKEY; k++)
        if (strcmp(pkeys[k].sect, sect) == 0 && strcmp(pkeys[k].name, name) == 0)
            return k;
    USIM_CHECK(0);   /* only names of the table are asked for */
    return 0;
}

/* Every key of object `sect` must be one of the table's. */
static int pkeys_known(usim_jdoc *d, json_t *obj, const char *sect)
{
    const char *names[NPKEY + 1];
    int n = 0;
    for (int k = 0; k < NPKEY; k++)
        if (strcmp(pkeys[k].sect, sect) == 0)
            names[n++] = pkeys[k].name;
    names[n] = NULL;
    return usim_json_known_keys(d, obj, sect, names);
}

/* Read every key of the table into v (defaults where absent), in order. */
static int pkeys_read(usim_jdoc *d, pval *v)
{
    json_t *obj[NPKEY] = {NULL};   /* the object each K_OBJ row names, by row */
    int rc = pkeys_known(d, d->root, ""), mesh = 0;
    for (int k = 0; k < NPKEY && !rc; k++) {
        const pkey *q = &pkeys[k];
        v[k] = (pval){.d = q->def, .i = (int64_t)q->def, .s = q->sdef};
        json_t *o = d->root;
        if (*q->sect)
            o = obj[pkey_find("", q->sect)];
        if (!o || q->kind == K_DOC || (q->topo == T_SWITCH && mesh) || (q->topo == T_MESH && !mesh))
            continue;   /* an optional object that is absent, or a key of the other topology */
        switch (q->kind) {
        case K_OBJ:
            if (q->required || json_object_get(o, q->name))
                if (!(rc = usim_json_obj(d, o, q->sect, q->name, &obj[k])))
                    rc = pkeys_known(d, obj[k], q->name);
            break;
        case K_STR:
            rc = usim_json_str(d, o, q->sect, q->name, q->required, &v[k].s);
            if (!rc && q->choice && !q->late && q->choice(v[k].s, &v[k].choice))
                rc = usim_json_err(d, q->sect, q->name, "must be %s (got \"%s\")", q->choices, v[k].s);
            if (!rc && q->choice == topo_choice) {
                mesh = v[k].choice;
                /* the keys of the other topology are errors, not ignored */
                for (int t = 0; t < NPKEY && !rc; t++)
                    if (pkeys[t].elsewhere && strcmp(pkeys[t].sect, q->sect) == 0 &&
                        (pkeys[t].topo == T_MESH) != mesh && json_object_get(o, pkeys[t].name))
                        rc = usim_json_err(d, q->sect, pkeys[t].name, "%s", pkeys[t].elsewhere);
            }
            break;
        case K_NUM:
            rc = usim_json_num(d, o, q->sect, q->name, q->required, q->lo, q->strict, &v[k].d);
            break;
        case K_INT:
            rc = usim_json_int(d, o, q->sect, q->name, q->required, (int64_t)q->lo, &v[k].i);
            break;
        case K_BOOL: {
            int b = (int)q->def;
            rc = usim_json_bool(d, o, q->sect, q->name, q->required, &b);
            v[k].i = b;
            break;
        }
        }
    }
    /* the checks after reading: choices of strings, upper bounds */
    int nlate = 0;
    for (int k = 0; k < NPKEY; k++)
        nlate = pkeys[k].late > nlate ? pkeys[k].late : nlate;
    for (int late = 1; late <= nlate && !rc; late++)
        for (int k = 0; k < NPKEY && !rc; k++) {
            const pkey *q = &pkeys[k];
            if (q->late != late)
                continue;
            if (q->choice && q->choice(v[k].s, &v[k].choice))
                rc = usim_json_err(d, q->sect, q->name, "must be %s (got \"%s\")", q->choices, v[k].s);
            else if (q->kind == K_NUM && q->hi && v[k].d > q->hi)
                rc = usim_json_err(d, q->sect, q->name, "must be in (%g, %g] (got %g)", q->lo, q->hi, v[k].d);
            else if (q->kind == K_INT && q->hi && (double)v[k].i > q->hi)
                rc = usim_json_err(d, q->sect, q->name, "must be <= %lld (got %lld)", (long long)q->hi,
                                   (long long)v[k].i);
        }
    return rc;
}

/* Store v in p, in the platform's units. */
static void pkeys_store(const pval *v, usim_platform *p)
{
    for (int k = 0; k < NPKEY; k++) {
        const pkey *q = &pkeys[k];
        char *at = (char *)p + q->off;
        if (q->kind == K_DOC || q->kind == K_OBJ)
            continue;
        if (q->kind == K_STR && !q->choice) {
            snprintf(at, sizeof p->name, "%s", v[k].s);
        } else if (q->kind == K_STR || q->kind == K_BOOL || q->kind == K_INT) {
            int64_t i = q->kind == K_STR ? v[k].choice : v[k].i;
            *(int *)at = (int)(q->clamp && i > q->clamp ? q->clamp : i);
        } else if (q->unit == U_US_PS) {
            *(usim_time *)at = usim_ps(v[k].d * 1e-6);
        } else {
            static const double scale[] = {[U_ONE] = 1, [U_TERA] = 1e12, [U_GIB] = 1073741824.0,
                                           [U_GIGA] = 1e9, [U_US_S] = 1e-6};
            *(double *)at = q->unit == U_GBIT ? v[k].d * 1e9 / 8 : v[k].d * scale[q->unit];
        }
    }
}
_Static_assert(sizeof(((usim_platform *)0)->name) == 64, "the one string field");

int usim_platform_load(const char *path, usim_platform *p)
{
    usim_jdoc d;
    pval v[NPKEY];
    memset(p, 0, sizeof *p);
    int rc = usim_json_load(&d, path);
    if (rc || (rc = pkeys_read(&d, v)))
        goto out;
#define V(sect, name) v[pkey_find(sect, name)]
    int64_t gpn = V("", "gpus_per_node").i, nics = V("inter_node", "nics_per_node").i;
    int64_t domain = V("intra_node", "nvlink_domain_gpus").i;
    int mesh = V("intra_node", "topology").choice;
    double hbm = V("gpu", "hbm_GiB").d;
    /* the checks that involve several keys */
    if (nics && (nics > gpn || gpn % nics != 0))
        rc = usim_json_err(&d, "inter_node", "nics_per_node", "must divide gpus_per_node (%lld) (got %lld)",
                           (long long)gpn, (long long)nics);
    else if (domain && (domain < gpn || domain % gpn != 0 || domain > 1000000))
        rc = usim_json_err(&d, "intra_node", "nvlink_domain_gpus", "must be a multiple of gpus_per_node "
                           "(%lld) and at most 1000000 (got %lld)", (long long)gpn, (long long)domain);
    else if (mesh && domain && domain != gpn)
        rc = usim_json_err(&d, "intra_node", "nvlink_domain_gpus", "a full_mesh node is its own domain "
                           "(%lld GPUs) (got %lld)", (long long)gpn, (long long)domain);
    else if (mesh && V("intra_node", "nvls").i)
        rc = usim_json_err(&d, "intra_node", "nvls", "a full_mesh node has no switch to reduce in");
    else if (mesh && gpn < 2)
        rc = usim_json_err(&d, "intra_node", "topology", "full_mesh needs gpus_per_node >= 2");
    else if (V("gpu", "reserved_GiB").d * 1.0 >= hbm)
        rc = usim_json_err(&d, "gpu", "reserved_GiB", "must be below hbm_GiB (%g)", hbm);
    if (rc)
        goto out;
    pkeys_store(v, p);
    snprintf(p->source, sizeof p->source, "%s", path);
    /* the defaults that derive from other keys */
    double bf16 = V("gpu", "peak_tflops_bf16").d;
    if (!(V("gpu", "peak_tflops_fp16").d > 0))
        p->peak_flops[USIM_FP16] = bf16 * 1e12;
    if (!(V("gpu", "peak_tflops_fp32").d > 0))
        p->peak_flops[USIM_FP32] = bf16 / 16 * 1e12;
    if (!(p->attn_bwd_eff > 0))
        p->attn_bwd_eff = p->attn_eff;
    p->nvl_domain = domain > gpn ? (int)domain : 0;   /* 0: the node */
    if (!(p->host_bytes > 0))   /* no host object: no host (its defaults do not apply) */
        p->host_link_eff = p->host_cpu_eff = 0;
#undef V
out:
    usim_json_free(&d);
    return rc;
}

/* ------------------------------------------------------------------- model */

static const char *const model_keys[] = {"name", "description", "sources", "layers", "hidden", "heads",
                                         "kv_heads", "ffn_hidden", "vocab", "mlp", "tied_embeddings",
                                         "causal", "seq_tokens", "micro_batch", "global_batch", "dtype",
                                         "head_dim", "qkv_bias", "o_bias", "qk_norm", NULL};

int usim_model_load(const char *path, usim_model *m)
{
    usim_jdoc d;
    memset(m, 0, sizeof *m);
    int rc = usim_json_load(&d, path);
    if (rc) {
        usim_json_free(&d);
        return rc;
    }
    if (usim_hf_is_config(d.root)) {   /* a HuggingFace config.json: sim/hfconfig.c */
        rc = usim_hf_model_load(&d, m);
        usim_json_free(&d);
        return rc;
    }
    json_t *r = d.root;
    const char *name = NULL, *mlp = "gelu", *dtype = "bf16";
    int tied = 1, causal = 1, qkv_bias = 0, o_bias = 0, qk_norm = 0;
    int64_t mb = 1, gb = 0;
    if ((rc = usim_json_known_keys(&d, r, "", model_keys)) ||
        (rc = usim_json_str(&d, r, "", "name", 1, &name)) ||
        (rc = usim_json_int(&d, r, "", "layers", 1, 1, &m->layers)) ||
        (rc = usim_json_int(&d, r, "", "hidden", 1, 1, &m->hidden)) ||
        (rc = usim_json_int(&d, r, "", "heads", 1, 1, &m->heads)) ||
        (rc = usim_json_int(&d, r, "", "kv_heads", 0, 1, &m->kv_heads)) ||
        (rc = usim_json_int(&d, r, "", "ffn_hidden", 1, 1, &m->ffn)) ||
        (rc = usim_json_int(&d, r, "", "vocab", 1, 1, &m->vocab)) ||
        (rc = usim_json_str(&d, r, "", "mlp", 0, &mlp)) ||
        (rc = usim_json_bool(&d, r, "", "tied_embeddings", 0, &tied)) ||
        (rc = usim_json_bool(&d, r, "", "causal", 0, &causal)) ||
        (rc = usim_json_int(&d, r, "", "seq_tokens", 1, 1, &m->seq)) ||
        (rc = usim_json_int(&d, r, "", "micro_batch", 0, 1, &mb)) ||
        (rc = usim_json_int(&d, r, "", "global_batch", 0, 1, &gb)) ||
        (rc = usim_json_str(&d, r, "", "dtype", 0, &dtype)) ||
        (rc = usim_json_int(&d, r, "", "head_dim", 0, 1, &m->head_dim)) ||
        (rc = usim_json_bool(&d, r, "", "qkv_bias", 0, &qkv_bias)) ||
        (rc = usim_json_bool(&d, r, "", "o_bias", 0, &o_bias)) ||
        (rc = usim_json_bool(&d, r, "", "qk_norm", 0, &qk_norm)))
        goto out;
    m->qkv_bias = qkv_bias;
    m->o_bias = o_bias;
    m->qk_norm = qk_norm;
    if (!json_object_get(r, "kv_heads"))
        m->kv_heads = m->heads;
    if (!m->head_dim && m->hidden % m->heads != 0) {
        rc = usim_json_err(&d, "", "heads", "hidden (%lld) must be a multiple of heads (%lld), or head_dim given",
                  (long long)m->hidden, (long long)m->heads);
        goto out;
    }
    if (m->heads % m->kv_heads != 0) {
        rc = usim_json_err(&d, "", "kv_heads", "heads (%lld) must be a multiple of kv_heads (%lld)",
                  (long long)m->heads, (long long)m->kv_heads);
        goto out;
    }
    if (strcmp(mlp, "gelu") == 0)
        m->gated_mlp = 0;
    else if (strcmp(mlp, "swiglu") == 0)
        m->gated_mlp = 1;
    else {
        rc = usim_json_err(&d, "", "mlp", "must be \"gelu\" or \"swiglu\" (got \"%s\")", mlp);
        goto out;
    }
    int dt;
    for (dt = 0; dt < USIM_NDTYPE; dt++)
        if (strcmp(dtype, usim_dtype_name((usim_dtype)dt)) == 0)
            break;
    if (dt == USIM_NDTYPE) {
        rc = usim_json_err(&d, "", "dtype", "must be bf16, fp16 or fp32 (got \"%s\")", dtype);
        goto out;
    }
    m->dtype = (usim_dtype)dt;
    m->tied_embeddings = tied;
    m->causal = causal;
    m->micro_batch = mb;
    m->global_batch = gb ? gb : mb;
    if (m->global_batch % mb != 0) {
        rc = usim_json_err(&d, "", "global_batch", "must be a multiple of micro_batch (%lld)", (long long)mb);
        goto out;
    }
    snprintf(m->name, sizeof m->name, "%s", name);
    snprintf(m->source, sizeof m->source, "%s", path);
out:
    usim_json_free(&d);
    return rc;
}

