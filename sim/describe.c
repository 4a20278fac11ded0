/*
 * describe.c -- platform and model descriptions: JSON loaders with located
 * errors, preset lookup, dtype names, parameter counts.
 */
#define _POSIX_C_SOURCE 200809L   /* stat */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/base.h"

#include "usim.h"
#include "usim_internal.h"
#include "jsonutil.h"

#ifndef USIM_SRC_PRESETS
#define USIM_SRC_PRESETS ""
#endif
#ifndef USIM_DATA_PRESETS
#define USIM_DATA_PRESETS ""
#endif

const char *usim_dtype_name(usim_dtype t)
{
    static const char *const n[USIM_NDTYPE] = {"bf16", "fp16", "fp32"};
    return (t >= 0 && t < USIM_NDTYPE) ? n[t] : "?";
}

int usim_dtype_bytes(usim_dtype t)
{
    static const int b[USIM_NDTYPE] = {2, 2, 4};
    return (t >= 0 && t < USIM_NDTYPE) ? b[t] : 0;
}

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

/* Every key a description file may hold (doc/simulator.md documents each);
 * any other key is an error naming the nearest of these. */
static const char *const platform_keys[] = {"name", "description", "sources", "calibration",
                                            "gpus_per_node", "max_nodes", "gpu", "intra_node",
                                            "inter_node", "collectives", NULL};
static const char *const gpu_keys[] = {"model", "peak_tflops_bf16", "peak_tflops_fp16",
                                       "peak_tflops_fp32", "gemm_efficiency", "attention_efficiency",
                                       "attention_bwd_efficiency", "attention_skips_masked_blocks",
                                       "hbm_GiB", "hbm_bw_GBps", "reserved_GiB", "sms", "gemm_tile_m",
                                       "gemm_tile_n", "gemm_k_half", "attention_head_dim_half",
                                       "launch_us", NULL};
static const char *const intra_keys[] = {"fabric", "topology", "bw_GBps_per_dir",
                                         "link_bw_GBps_per_dir", "nvlink_domain_gpus", "efficiency",
                                         "latency_us", "a2a_call_us", "nvls", "nvls_efficiency", NULL};
static const char *const coll_keys[] = {"all_reduce", "all_gather", "reduce_scatter", "protocol", NULL};
static const char *const inter_keys[] = {"fabric", "nic_bw_Gbps", "nics_per_node", "efficiency",
                                         "latency_us", "a2a_call_us", "spine_oversubscription", NULL};
static const char *const model_keys[] = {"name", "description", "sources", "layers", "hidden", "heads",
                                         "kv_heads", "ffn_hidden", "vocab", "mlp", "tied_embeddings",
                                         "causal", "seq_tokens", "micro_batch", "global_batch", "dtype",
                                         NULL};

int usim_platform_load(const char *path, usim_platform *p)
{
    usim_jdoc d;
    memset(p, 0, sizeof *p);
    int rc = usim_json_load(&d, path);
    if (rc) {
        usim_json_free(&d);
        return rc;
    }
    json_t *root = d.root, *gpu, *intra, *inter;
    const char *name = NULL;
    int64_t gpn = 0, maxn = 0, nics = 0, domain = 0;
    const char *topo = "switch";
    double linkbw = 0;
    int mesh = 0;
    double bf16 = 0, fp16 = 0, fp32 = 0, ge = 0, ae = 0, abe = 0, hbm = 0, hbmbw = 0, resv = 0;
    int skip = 1;
    double nvbw = 0, nveff = 1, nvlat = 0, nicbw = 0, niceff = 1, niclat = 0, over = 1;
    double nvcall = 0, niccall = 0;
    int nvls = 0;
    int64_t sms = 0;
    double tile_m = 128, tile_n = 128, k_half = 0, d_half = 0, launch_us = 0;
    double nvls_eff = 0.85;
    json_t *coll = NULL;
    const char *algo_ar = "auto", *algo_ag = "auto", *algo_rs = "auto", *proto = "auto";
    if ((rc = usim_json_known_keys(&d, root, "", platform_keys)) ||
        (rc = usim_json_str(&d, root, "", "name", 1, &name)) ||
        (rc = usim_json_int(&d, root, "", "gpus_per_node", 1, 1, &gpn)) ||
        (rc = usim_json_int(&d, root, "", "max_nodes", 0, 0, &maxn)) ||
        (rc = usim_json_obj(&d, root, "", "gpu", &gpu)) ||
        (rc = usim_json_known_keys(&d, gpu, "gpu", gpu_keys)) ||
        (rc = usim_json_num(&d, gpu, "gpu", "peak_tflops_bf16", 1, 0, 1, &bf16)) ||
        (rc = usim_json_num(&d, gpu, "gpu", "peak_tflops_fp16", 0, 0, 1, &fp16)) ||
        (rc = usim_json_num(&d, gpu, "gpu", "peak_tflops_fp32", 0, 0, 1, &fp32)) ||
        (rc = usim_json_num(&d, gpu, "gpu", "gemm_efficiency", 1, 0, 1, &ge)) ||
        (rc = usim_json_num(&d, gpu, "gpu", "attention_efficiency", 1, 0, 1, &ae)) ||
        (rc = usim_json_num(&d, gpu, "gpu", "attention_bwd_efficiency", 0, 0, 1, &abe)) ||
        (rc = usim_json_bool(&d, gpu, "gpu", "attention_skips_masked_blocks", 0, &skip)) ||
        (rc = usim_json_num(&d, gpu, "gpu", "hbm_GiB", 1, 0, 1, &hbm)) ||
        (rc = usim_json_num(&d, gpu, "gpu", "hbm_bw_GBps", 1, 0, 1, &hbmbw)) ||
        (rc = usim_json_num(&d, gpu, "gpu", "reserved_GiB", 0, 0, 0, &resv)) ||
        (rc = usim_json_int(&d, gpu, "gpu", "sms", 0, 0, &sms)) ||
        (rc = usim_json_num(&d, gpu, "gpu", "gemm_tile_m", 0, 1, 0, &tile_m)) ||
        (rc = usim_json_num(&d, gpu, "gpu", "gemm_tile_n", 0, 1, 0, &tile_n)) ||
        (rc = usim_json_num(&d, gpu, "gpu", "gemm_k_half", 0, 0, 0, &k_half)) ||
        (rc = usim_json_num(&d, gpu, "gpu", "attention_head_dim_half", 0, 0, 0, &d_half)) ||
        (rc = usim_json_num(&d, gpu, "gpu", "launch_us", 0, 0, 0, &launch_us)) ||
        (rc = usim_json_obj(&d, root, "", "intra_node", &intra)) ||
        (rc = usim_json_known_keys(&d, intra, "intra_node", intra_keys)) ||
        (rc = usim_json_str(&d, intra, "intra_node", "topology", 0, &topo)))
        goto out;
    if (strcmp(topo, "full_mesh") == 0)
        mesh = 1;
    else if (strcmp(topo, "switch") != 0) {
        rc = usim_json_err(&d, "intra_node", "topology", "must be \"switch\" or \"full_mesh\" (got \"%s\")",
                           topo);
        goto out;
    }
    if (mesh && json_object_get(intra, "bw_GBps_per_dir")) {
        rc = usim_json_err(&d, "intra_node", "bw_GBps_per_dir",
                           "a full_mesh node gives link_bw_GBps_per_dir (one peer link) instead; the "
                           "GPU's total is (gpus_per_node - 1) times it");
        goto out;
    }
    if (!mesh && json_object_get(intra, "link_bw_GBps_per_dir")) {
        rc = usim_json_err(&d, "intra_node", "link_bw_GBps_per_dir",
                           "only for \"topology\": \"full_mesh\" (a switched node gives bw_GBps_per_dir)");
        goto out;
    }
    if ((rc = usim_json_num(&d, intra, "intra_node", mesh ? "link_bw_GBps_per_dir" : "bw_GBps_per_dir", 1,
                            0, 1, mesh ? &linkbw : &nvbw)) ||
        (rc = usim_json_int(&d, intra, "intra_node", "nvlink_domain_gpus", 0, 1, &domain)) ||
        (rc = usim_json_num(&d, intra, "intra_node", "efficiency", 0, 0, 1, &nveff)) ||
        (rc = usim_json_num(&d, intra, "intra_node", "latency_us", 1, 0, 0, &nvlat)) ||
        (rc = usim_json_num(&d, intra, "intra_node", "a2a_call_us", 0, 0, 0, &nvcall)) ||
        (rc = usim_json_bool(&d, intra, "intra_node", "nvls", 0, &nvls)) ||
        (rc = usim_json_num(&d, intra, "intra_node", "nvls_efficiency", 0, 0, 1, &nvls_eff)) ||
        (rc = usim_json_obj(&d, root, "", "inter_node", &inter)) ||
        (rc = usim_json_known_keys(&d, inter, "inter_node", inter_keys)) ||
        (rc = usim_json_num(&d, inter, "inter_node", "nic_bw_Gbps", 1, 0, 1, &nicbw)) ||
        (rc = usim_json_int(&d, inter, "inter_node", "nics_per_node", 0, 1, &nics)) ||
        (rc = usim_json_num(&d, inter, "inter_node", "efficiency", 0, 0, 1, &niceff)) ||
        (rc = usim_json_num(&d, inter, "inter_node", "latency_us", 1, 0, 0, &niclat)) ||
        (rc = usim_json_num(&d, inter, "inter_node", "a2a_call_us", 0, 0, 0, &niccall)) ||
        (rc = usim_json_num(&d, inter, "inter_node", "spine_oversubscription", 0, 1, 0, &over)))
        goto out;
    if (json_object_get(root, "collectives")) {
        if ((rc = usim_json_obj(&d, root, "", "collectives", &coll)) ||
            (rc = usim_json_known_keys(&d, coll, "collectives", coll_keys)) ||
            (rc = usim_json_str(&d, coll, "collectives", "all_reduce", 0, &algo_ar)) ||
            (rc = usim_json_str(&d, coll, "collectives", "all_gather", 0, &algo_ag)) ||
            (rc = usim_json_str(&d, coll, "collectives", "reduce_scatter", 0, &algo_rs)) ||
            (rc = usim_json_str(&d, coll, "collectives", "protocol", 0, &proto)))
            goto out;
    }
    {
        const char *keys[3] = {"all_reduce", "all_gather", "reduce_scatter"};
        const char *vals[3] = {algo_ar, algo_ag, algo_rs};
        usim_algo *dst[3] = {&p->algo_allreduce, &p->algo_allgather, &p->algo_reduce_scatter};
        for (int k = 0; k < 3; k++)
            if (usim_algo_parse(vals[k], dst[k]) ||
                (*dst[k] == USIM_ALGO_TREE && k != 0)) {
                rc = usim_json_err(&d, "collectives", keys[k],
                                   "must be auto, ring%s or nvls (got \"%s\")", k == 0 ? ", tree" : "",
                                   vals[k]);
                goto out;
            }
        if (usim_proto_parse(proto, &p->proto)) {
            rc = usim_json_err(&d, "collectives", "protocol",
                               "must be auto, LL, LL128 or Simple (got \"%s\")", proto);
            goto out;
        }
    }
    if (nvls_eff > 1)
        { rc = usim_json_err(&d, "intra_node", "nvls_efficiency", "must be in (0, 1] (got %g)", nvls_eff); goto out; }
    if (ge > 1)
        { rc = usim_json_err(&d, "gpu", "gemm_efficiency", "must be in (0, 1] (got %g)", ge); goto out; }
    if (ae > 1)
        { rc = usim_json_err(&d, "gpu", "attention_efficiency", "must be in (0, 1] (got %g)", ae); goto out; }
    if (abe > 1)
        { rc = usim_json_err(&d, "gpu", "attention_bwd_efficiency", "must be in (0, 1] (got %g)", abe); goto out; }
    if (nveff > 1)
        { rc = usim_json_err(&d, "intra_node", "efficiency", "must be in (0, 1] (got %g)", nveff); goto out; }
    if (niceff > 1)
        { rc = usim_json_err(&d, "inter_node", "efficiency", "must be in (0, 1] (got %g)", niceff); goto out; }
    if (gpn > 4096)
        { rc = usim_json_err(&d, "", "gpus_per_node", "must be <= 4096 (got %lld)", (long long)gpn); goto out; }
    if (nics && (nics > gpn || gpn % nics != 0))
        { rc = usim_json_err(&d, "inter_node", "nics_per_node", "must divide gpus_per_node (%lld) (got %lld)",
                             (long long)gpn, (long long)nics); goto out; }
    if (domain && (domain < gpn || domain % gpn != 0 || domain > 1000000))
        { rc = usim_json_err(&d, "intra_node", "nvlink_domain_gpus", "must be a multiple of gpus_per_node "
                             "(%lld) and at most 1000000 (got %lld)", (long long)gpn, (long long)domain); goto out; }
    if (mesh && domain && domain != gpn)
        { rc = usim_json_err(&d, "intra_node", "nvlink_domain_gpus", "a full_mesh node is its own domain "
                             "(%lld GPUs) (got %lld)", (long long)gpn, (long long)domain); goto out; }
    if (mesh && nvls)
        { rc = usim_json_err(&d, "intra_node", "nvls", "a full_mesh node has no switch to reduce in"); goto out; }
    if (mesh && gpn < 2)
        { rc = usim_json_err(&d, "intra_node", "topology", "full_mesh needs gpus_per_node >= 2"); goto out; }
    if (resv * 1.0 >= hbm)
        { rc = usim_json_err(&d, "gpu", "reserved_GiB", "must be below hbm_GiB (%g)", hbm); goto out; }
    snprintf(p->name, sizeof p->name, "%s", name);
    snprintf(p->source, sizeof p->source, "%s", path);
    p->gpus_per_node = (int)gpn;
    p->max_nodes = (int)(maxn > 1000000 ? 1000000 : maxn);
    p->peak_flops[USIM_BF16] = bf16 * 1e12;
    p->peak_flops[USIM_FP16] = (fp16 > 0 ? fp16 : bf16) * 1e12;
    p->peak_flops[USIM_FP32] = (fp32 > 0 ? fp32 : bf16 / 16) * 1e12;
    p->gemm_eff = ge;
    p->attn_eff = ae;
    p->attn_bwd_eff = abe > 0 ? abe : ae;
    p->attn_causal_skip = skip;
    p->hbm_bytes = hbm * 1073741824.0;
    p->hbm_Bps = hbmbw * 1e9;
    p->reserved_bytes = resv * 1073741824.0;
    p->full_mesh = mesh;
    p->mesh_link_Bps = linkbw * 1e9 * nveff;
    p->nvl_Bps = mesh ? (double)(gpn - 1) * p->mesh_link_Bps : nvbw * 1e9 * nveff;
    p->nvl_domain = domain > gpn ? (int)domain : 0;   /* 0: the node */
    p->nvl_lat = usim_ps(nvlat * 1e-6);
    p->nic_Bps = nicbw * 1e9 / 8 * niceff;
    p->nic_lat = usim_ps(niclat * 1e-6);
    p->a2a_call[USIM_CLASS_NVLINK] = usim_ps(nvcall * 1e-6);
    p->a2a_call[USIM_CLASS_NIC] = usim_ps(niccall * 1e-6);
    p->oversub = over;
    p->nics_per_node = (int)nics;
    p->nvls = nvls;
    p->sms = (int)(sms > 100000 ? 100000 : sms);
    p->gemm_tile_m = tile_m;
    p->gemm_tile_n = tile_n;
    p->gemm_k_half = k_half;
    p->attn_d_half = d_half;
    p->launch_s = launch_us * 1e-6;
    p->nvls_eff = nvls_eff;
out:
    usim_json_free(&d);
    return rc;
}

/* ------------------------------------------------------------------- model */

int usim_model_load(const char *path, usim_model *m)
{
    usim_jdoc d;
    memset(m, 0, sizeof *m);
    int rc = usim_json_load(&d, path);
    if (rc) {
        usim_json_free(&d);
        return rc;
    }
    json_t *r = d.root;
    const char *name = NULL, *mlp = "gelu", *dtype = "bf16";
    int tied = 1, causal = 1;
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
        (rc = usim_json_str(&d, r, "", "dtype", 0, &dtype)))
        goto out;
    if (!json_object_get(r, "kv_heads"))
        m->kv_heads = m->heads;
    if (m->hidden % m->heads != 0) {
        rc = usim_json_err(&d, "", "heads", "hidden (%lld) must be a multiple of heads (%lld)",
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

double usim_model_params(const usim_model *m)
{
    double h = (double)m->hidden, d = h / m->heads, hkv = d * m->kv_heads, F = (double)m->ffn;
    double attn = h * (h + 2 * hkv) + h * h;
    double mlp = (m->gated_mlp ? 3 : 2) * h * F;
    double norms = 4 * h;
    double emb = (double)m->vocab * h * (m->tied_embeddings ? 1 : 2);
    return m->layers * (attn + mlp + norms) + emb + 2 * h;
}
