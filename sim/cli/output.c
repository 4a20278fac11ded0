/* SPDX-License-Identifier: Apache-2.0 */
/*
 * output.c -- table, CSV and JSON output of ulysses-sim.
 */
#include <string.h>

#include "base/base.h"
#include "base/base_json.h"
#include "output.h"

const char *out_safe(const char *s, char *buf)
{
    uly_sanitize(buf, OUT_SAFE, s);
    return buf;
}

#define GIB 1073741824.0

static void cell(FILE *f, const char *s) { fprintf(f, " %13s", s); }

void out_table(FILE *f, const usim_platform *p, const usim_model *m, const row *rows, int n)
{
    const usim_result *r0 = NULL;
    for (int i = 0; i < n; i++)
        if (rows[i].ok) {
            r0 = &rows[i].r;
            break;
        }
    char mn[OUT_SAFE], pn[OUT_SAFE];
    fprintf(f, "%s on %d GPUs of %s, %lld tokens per sequence, %s\n", out_safe(m->name, mn),
            r0 ? r0->job.gpus : 0, out_safe(p->name, pn), (long long)m->seq, usim_dtype_name(m->dtype));
    if (r0)
        fprintf(f, "global batch %lld sequences (%d micro-steps of %lld), ZeRO-%d, recompute %s%s%s\n\n",
                (long long)r0->global_batch, r0->micro_steps, (long long)m->micro_batch, r0->job.zero,
                usim_recompute_name(r0->job.recompute),
                r0->job.attn_kernel == USIM_ATTN_UNFUSED ? ", attention " : "",
                r0->job.attn_kernel == USIM_ATTN_UNFUSED ? out_attn_kernel(&r0->job) : "");
    char buf[64];
    fprintf(f, "%-38s", "");
    for (int i = 0; i < n; i++)
        cell(f, uly_method_sim_name(rows[i].method));
    fputc('\n', f);
#define ROW(label, fmtexpr)                                    \
    do {                                                       \
        fprintf(f, "%-38s", label);                            \
        for (int i = 0; i < n; i++) {                          \
            const usim_result *r = &rows[i].r;                 \
            (void)r;                                           \
            if (!rows[i].ok) {                                 \
                cell(f, "-");                                  \
                continue;                                      \
            }                                                  \
            fmtexpr;                                           \
            cell(f, buf);                                      \
        }                                                      \
        fputc('\n', f);                                        \
    } while (0)
    int composed = 0;
    for (int i = 0; i < n; i++)
        composed |= rows[i].ok && ((rows[i].r.job.tp > 1 && rows[i].method != ULY_METHOD_MEGATRON_SP) ||
                                   rows[i].r.job.pp > 1);
    if (!composed)
        ROW("degrees sp x dp (ulysses x ring)", {
            if (r->job.method == ULY_METHOD_USP)
                snprintf(buf, sizeof buf, "%dx%d (%dx%d)", r->job.sp, r->job.dp, r->job.ulysses,
                         r->job.sp / r->job.ulysses);
            else
                snprintf(buf, sizeof buf, "%dx%d", r->job.sp, r->job.dp);
        });
    else
        ROW("degrees tp x sp x pp x dp", {
            int t = r->job.method == ULY_METHOD_MEGATRON_SP ? r->job.tp : r->job.tp;
            int c = r->job.method == ULY_METHOD_MEGATRON_SP ? 1 : r->job.sp;
            snprintf(buf, sizeof buf, "%dx%dx%dx%d", t, c, r->job.pp, r->job.dp);
        });
    ROW("iteration time [s]", snprintf(buf, sizeof buf, "%.3f", r->iter_s));
    ROW("compute time [s]", snprintf(buf, sizeof buf, "%.3f", r->compute_s));
    ROW("exposed comm: sequence parallel [s]", snprintf(buf, sizeof buf, "%.3f", r->exposed_s[USIM_KIND_SP]));
    ROW("exposed comm: parameter gather [s]", snprintf(buf, sizeof buf, "%.3f", r->exposed_s[USIM_KIND_PARAM]));
    ROW("exposed comm: gradient reduce [s]", snprintf(buf, sizeof buf, "%.3f", r->exposed_s[USIM_KIND_GRAD]));
    if (composed)
    {
        ROW("pipeline bubble [s]", snprintf(buf, sizeof buf, "%.3f", r->bubble_s));
        ROW("pipeline bubble fraction", snprintf(buf, sizeof buf, "%.4f", r->bubble_frac));
        ROW("pipeline schedule", {
            if (r->job.pp < 2)
                snprintf(buf, sizeof buf, "none");
            else if (r->job.vpp > 1)
                snprintf(buf, sizeof buf, "interleaved 1F1B, V %d", r->job.vpp);
            else
                snprintf(buf, sizeof buf, "1F1B");
        });
        ROW("pipeline in flight, first stage", snprintf(buf, sizeof buf, "%d", r->pp_inflight));
    }
    ROW("SP comm per layer forward [MB/GPU]", snprintf(buf, sizeof buf, "%.1f", r->sp_bytes_layer_fwd / 1e6));
    ROW("sent over NVLink [GB/GPU/iter]", snprintf(buf, sizeof buf, "%.2f", r->sent_bytes[USIM_CLASS_NVLINK] / 1e9));
    ROW("sent over NIC [GB/GPU/iter]", snprintf(buf, sizeof buf, "%.2f", r->sent_bytes[USIM_CLASS_NIC] / 1e9));
    ROW("throughput, Megatron formula [TFLOP/s/GPU]", snprintf(buf, sizeof buf, "%.1f", r->tflops));
    ROW("MFU (model FLOPs / peak) [%]", snprintf(buf, sizeof buf, "%.1f", 100 * r->mfu));
    ROW("memory per GPU [GiB]", snprintf(buf, sizeof buf, "%.1f", r->mem.total / GIB));
    /* with a long-context technique the layer and loss working sets are not live together */
    ROW("  activations + logits [GiB]", snprintf(buf, sizeof buf, "%.1f",
                                                (usim_job_longctx(&r->job) ? r->mem.total - r->mem.params - r->mem.grads -
                                                 r->mem.optim - r->mem.buffers - r->mem.reserved
                                                 : r->mem.activations + r->mem.logits) / GIB));
    ROW("  params + grads + optimizer [GiB]", snprintf(buf, sizeof buf, "%.1f", (r->mem.params + r->mem.grads + r->mem.optim) / GIB));
    int any_lc = 0, any_host = 0;
    for (int i = 0; i < n; i++) {
        any_lc |= rows[i].ok && usim_job_longctx(&rows[i].r.job);
        any_host |= rows[i].ok && rows[i].r.mem.host_node > 0;
    }
    if (any_lc) {
        ROW("  layer backward working set [GiB]", snprintf(buf, sizeof buf, "%.1f", r->mem.layer_ws / GIB));
        ROW("  loss working set [GiB]", snprintf(buf, sizeof buf, "%.1f", r->mem.loss_ws / GIB));
        ROW("  checkpoints resident in HBM [GiB]", snprintf(buf, sizeof buf, "%.1f", r->mem.resident / GIB));
    }
    if (any_host)
        ROW("host memory per node [GiB]", snprintf(buf, sizeof buf, "%.1f", r->mem.host_node / GIB));
    if (any_lc) {
        ROW("tiled MLP: extra forward [s]", snprintf(buf, sizeof buf, "%.3f", r->lc.tiled_mlp_s));
        ROW("offload: copies not hidden [s]", snprintf(buf, sizeof buf, "%.3f", r->lc.offload_exposed_s));
        ROW("offload: CPU Adam step [s]", snprintf(buf, sizeof buf, "%.3f", r->lc.cpu_adam_s));
        ROW("offload: parameter fetches [s]", snprintf(buf, sizeof buf, "%.3f", r->lc.param_fetch_s));
    }
    int any_max = 0;
    for (int i = 0; i < n; i++)
        any_max |= rows[i].has_max;
    if (any_max)
        ROW("longest sequence that fits [tokens]", snprintf(buf, sizeof buf, "%lld", (long long)rows[i].max_seq));
    ROW("simulation engine", usim_engine_desc(r, buf, sizeof buf));
    snprintf(buf, sizeof buf, "fits in %.0f GiB [yes/no]", p->hbm_bytes / GIB);
    char label[64];
    snprintf(label, sizeof label, "%s", buf);
    ROW(label, snprintf(buf, sizeof buf, "%s", r->fits ? "yes" : "NO (OOM)"));
    ROW("binding memory limit", snprintf(buf, sizeof buf, "%s", usim_bind_name(r->mem.bind)));
    if (any_max)
        ROW("limit at the longest sequence", snprintf(buf, sizeof buf, "%s", usim_bind_name(rows[i].max_bind)));
#undef ROW
    int zig = 0;
    for (int i = 0; i < n; i++)
        zig |= rows[i].ok && rows[i].method == ULY_METHOD_ZIGZAG;
    if (zig && m->causal && !p->attn_causal_skip)
        fprintf(f, "\nnote: %s's attention kernels compute masked blocks "
                   "(attention_skips_masked_blocks = false), so zigzag balancing saves no work",
                pn);
    for (int i = 0; i < n; i++)
        if (!rows[i].ok)
            fprintf(f, "\n%s: not run: %s", uly_method_sim_name(rows[i].method), rows[i].err);
    if (composed)
        for (int i = 0; i < n; i++)
            if (rows[i].ok) {
                char pl[256];
                usim_job_placement(p, &rows[i].r.job, pl, sizeof pl);
                fprintf(f, "\nplacement: %s: %s", uly_method_sim_name(rows[i].method), pl);
            }
    for (int i = 0; i < n; i++)
        for (int k = 0; rows[i].ok && k < rows[i].r.nwarn; k++)
            fprintf(f, "\nwarning: %s: %s", uly_method_sim_name(rows[i].method), rows[i].r.warn[k]);
    fputc('\n', f);
}

const char *out_attn_kernel(const usim_job *j)
{
    if (j->attn_kernel != USIM_ATTN_UNFUSED)
        return "flash";
    return j->attn_dropout ? "unfused+dropout" : "unfused";
}

void out_csv_header(FILE *f)
{
    /* columns are only ever appended, so scripts that cut fields keep working */
    fputs("method,platform,model,gpus,sp,tp,dp,ulysses_degree,ring_degree,zero,recompute,"
          "seq_tokens,global_batch_seqs,micro_steps,iter_s,compute_s,exposed_sp_s,exposed_param_s,"
          "exposed_grad_s,sp_bytes_layer_fwd_B,nvlink_sent_GB,nic_sent_GB,tflops_per_gpu,mfu_pct,"
          "mem_GiB,fits,max_seq_tokens,error,warnings,pp,bubble_s,placement,engine,"
          "mem_limit,host_GiB_per_node,tiled_loss,tiled_mlp_shards,offload,head_chunks,"
          "tiled_mlp_s,offload_exposed_s,offload_copy_s,cpu_adam_s,param_fetch_s,max_seq_limit,"
          "host_link_s_per_GB,vpp,bubble_frac,pp_inflight,attn_kernel\n", f);
}

/* A quoted CSV field: "" for a quote. */
static void csv_str(FILE *f, const char *s)
{
    uly_fput_quoted(f, s, '"', 0);
}

/* A name field (from a file: control and bidi characters escaped), quoted
 * only when it needs to be. */
static void csv_name(FILE *f, const char *raw)
{
    char s[OUT_SAFE];
    out_safe(raw, s);
    if (strpbrk(s, ",\"\n\r"))
        csv_str(f, s);
    else
        fputs(s, f);
}

void out_csv_row(FILE *f, const usim_platform *p, const usim_model *m, int gpus, const row *w)
{
    const usim_result *r = &w->r;
    fprintf(f, "%s,", uly_method_sim_name(w->method));
    csv_name(f, p->name);
    fputc(',', f);
    csv_name(f, m->name);
    fprintf(f, ",%d,", gpus);
    if (!w->ok) {
        fprintf(f, ",,,,,,,%lld,,,,,,,,,,,,,,,,", (long long)m->seq);
        csv_str(f, w->err);
        fputs(",,,,,,,,,,,,,,,,,,,,,\n", f);
        return;
    }
    fprintf(f, "%d,%d,%d,%d,%d,%d,%s,%lld,%lld,%d,%.6f,%.6f,%.6f,%.6f,%.6f,%.0f,%.4f,%.4f,%.2f,%.2f,%.3f,%d,",
            r->job.sp, r->job.tp, r->job.dp, r->job.ulysses, r->job.sp / r->job.ulysses, r->job.zero,
            usim_recompute_name(r->job.recompute), (long long)r->seq, (long long)r->global_batch,
            r->micro_steps, r->iter_s, r->compute_s, r->exposed_s[0], r->exposed_s[1],
            r->exposed_s[2], r->sp_bytes_layer_fwd, r->sent_bytes[0] / 1e9, r->sent_bytes[1] / 1e9,
            r->tflops, 100 * r->mfu, r->mem.total / GIB, r->fits);
    if (w->has_max)
        fprintf(f, "%lld", (long long)w->max_seq);
    fputs(",,", f);
    if (r->nwarn) {
        char all[USIM_MAX_WARN * 242] = "";
        for (int k = 0; k < r->nwarn; k++) {
            if (k)
                strcat(all, "; ");
            strcat(all, r->warn[k]);
        }
        csv_str(f, all);
    }
    char pl[256];
    usim_job_placement(p, &r->job, pl, sizeof pl);
    fprintf(f, ",%d,%.6f,", r->job.pp, r->bubble_s);
    csv_name(f, pl);
    char eng[160];
    usim_engine_desc(r, eng, sizeof eng);
    fputc(',', f);
    csv_name(f, eng);
    char off[64];
    out_offload(r->job.offload, off, sizeof off);
    fprintf(f, ",%s,%.3f,%d,%lld,%s,%d,%.6f,%.6f,%.6f,%.6f,%.6f,%s,", usim_bind_name(r->mem.bind),
            r->mem.host_node / GIB, r->job.tiled_loss, (long long)r->lc.mlp_shards, off,
            r->job.head_chunks > 1 ? r->job.head_chunks : 1, r->lc.tiled_mlp_s, r->lc.offload_exposed_s,
            r->lc.offload_copy_s, r->lc.cpu_adam_s, r->lc.param_fetch_s,
            w->has_max ? usim_bind_name(w->max_bind) : "");
    if (usim_host_link_Bps(p) > 0)
        fprintf(f, "%.4f", 1e9 / usim_host_link_Bps(p));
    fprintf(f, ",%d,%.6f,%d,%s\n", r->job.vpp > 1 ? r->job.vpp : 1, r->bubble_frac, r->pp_inflight,
            out_attn_kernel(&r->job));
}

void out_offload(int bits, char *buf, size_t n)
{
    snprintf(buf, n, "%s%s%s%s", bits & USIM_OFFLOAD_ACT ? "activations" : "",
             (bits & USIM_OFFLOAD_ACT) && (bits & ~USIM_OFFLOAD_ACT) ? "+" : "",
             bits & USIM_OFFLOAD_OPTIM ? (bits & USIM_OFFLOAD_PARAMS ? "optimizer+params" : "optimizer")
                                       : bits & USIM_OFFLOAD_PARAMS ? "params" : "",
             bits ? "" : "none");
}

/* Through jansson (src/base/base_json.h): strings escaped by the library, a
 * number that is not finite written as null plus "<key>_nonfinite".  One
 * line; numbers keep the decimals of the table and CSV. */
int out_json(FILE *f, const usim_platform *p, const usim_model *m, int gpus, const row *rows, int n)
{
    json_t *root = json_object(), *arr = NULL;
    int bad = !root;
    if (!bad) {
        bad |= uly_json_set_str(root, "platform", p->name);
        bad |= uly_json_set_str(root, "model", m->name);
        bad |= uly_json_set_int(root, "gpus", gpus);
        bad |= uly_json_set_int(root, "seq_tokens", m->seq);
        bad |= !(arr = uly_json_add_array(root, "results"));
    }
    for (int i = 0; i < n && !bad; i++) {
        const row *w = &rows[i];
        const usim_result *r = &w->r;
        json_t *o = uly_json_append_object(arr);
        if (!o) {
            bad = 1;
            break;
        }
        bad |= uly_json_set_str(o, "method", uly_method_sim_name(w->method));
        if (!w->ok) {
            bad |= uly_json_set_str(o, "error", w->err);
            continue;
        }
        char pl[256];
        usim_job_placement(p, &r->job, pl, sizeof pl);
        bad |= uly_json_set_int(o, "pp", r->job.pp);
        bad |= uly_json_set_fixed(o, "bubble_s", r->bubble_s, 6);
        bad |= uly_json_set_str(o, "placement", pl);
        bad |= uly_json_set_int(o, "vpp", r->job.vpp > 1 ? r->job.vpp : 1);
        bad |= uly_json_set_fixed(o, "bubble_frac", r->bubble_frac, 6);
        bad |= uly_json_set_int(o, "pp_inflight", r->pp_inflight);
        char eng[160];
        usim_engine_desc(r, eng, sizeof eng);
        bad |= uly_json_set_str(o, "engine", eng);
        bad |= uly_json_set_int(o, "sp", r->job.sp);
        bad |= uly_json_set_int(o, "tp", r->job.tp);
        bad |= uly_json_set_int(o, "dp", r->job.dp);
        bad |= uly_json_set_int(o, "ulysses_degree", r->job.ulysses);
        bad |= uly_json_set_int(o, "ring_degree", r->job.sp / r->job.ulysses);
        bad |= uly_json_set_int(o, "zero", r->job.zero);
        bad |= uly_json_set_str(o, "recompute", usim_recompute_name(r->job.recompute));
        bad |= uly_json_set_int(o, "global_batch_seqs", r->global_batch);
        bad |= uly_json_set_int(o, "micro_steps", r->micro_steps);
        bad |= uly_json_set_int(o, "micro_batch",
                                r->global_batch / ((int64_t)r->micro_steps * (r->job.dp > 0 ? r->job.dp : 1)));
        bad |= uly_json_set_fixed(o, "iter_s", r->iter_s, 6);
        bad |= uly_json_set_fixed(o, "compute_s", r->compute_s, 6);
        bad |= uly_json_set_fixed(o, "exposed_sp_s", r->exposed_s[0], 6);
        bad |= uly_json_set_fixed(o, "exposed_param_s", r->exposed_s[1], 6);
        bad |= uly_json_set_fixed(o, "exposed_grad_s", r->exposed_s[2], 6);
        bad |= uly_json_set_fixed(o, "sp_bytes_layer_fwd_B", r->sp_bytes_layer_fwd, 0);
        bad |= uly_json_set_fixed(o, "nvlink_sent_GB", r->sent_bytes[0] / 1e9, 4);
        bad |= uly_json_set_fixed(o, "nic_sent_GB", r->sent_bytes[1] / 1e9, 4);
        bad |= uly_json_set_fixed(o, "tflops_per_gpu", r->tflops, 2);
        bad |= uly_json_set_fixed(o, "mfu_pct", 100 * r->mfu, 2);
        bad |= uly_json_set_fixed(o, "mem_GiB", r->mem.total / GIB, 3);
        bad |= uly_json_set_fixed(o, "mem_params_GiB", r->mem.params / GIB, 3);
        bad |= uly_json_set_fixed(o, "mem_grads_GiB", r->mem.grads / GIB, 3);
        bad |= uly_json_set_fixed(o, "mem_optim_GiB", r->mem.optim / GIB, 3);
        bad |= uly_json_set_fixed(o, "mem_activations_GiB", r->mem.activations / GIB, 3);
        bad |= uly_json_set_fixed(o, "mem_logits_GiB", r->mem.logits / GIB, 3);
        bad |= uly_json_set_fixed(o, "mem_buffers_GiB", r->mem.buffers / GIB, 3);
        bad |= uly_json_set_bool(o, "fits", r->fits);
        bad |= uly_json_set_str(o, "mem_limit", usim_bind_name(r->mem.bind));
        bad |= uly_json_set_fixed(o, "mem_resident_GiB", r->mem.resident / GIB, 3);
        bad |= uly_json_set_fixed(o, "mem_layer_ws_GiB", r->mem.layer_ws / GIB, 3);
        bad |= uly_json_set_fixed(o, "mem_loss_ws_GiB", r->mem.loss_ws / GIB, 3);
        bad |= uly_json_set_fixed(o, "host_GiB_per_node", r->mem.host_node / GIB, 3);
        bad |= uly_json_set_bool(o, "tiled_loss", r->job.tiled_loss);
        bad |= uly_json_set_int(o, "tiled_mlp_shards", r->lc.mlp_shards);
        char off[64];
        out_offload(r->job.offload, off, sizeof off);
        bad |= uly_json_set_str(o, "offload", off);
        bad |= uly_json_set_int(o, "head_chunks", r->job.head_chunks > 1 ? r->job.head_chunks : 1);
        bad |= uly_json_set_str(o, "attn_kernel", out_attn_kernel(&r->job));
        bad |= uly_json_set_fixed(o, "tiled_mlp_s", r->lc.tiled_mlp_s, 6);
        bad |= uly_json_set_fixed(o, "offload_exposed_s", r->lc.offload_exposed_s, 6);
        bad |= uly_json_set_fixed(o, "offload_copy_s", r->lc.offload_copy_s, 6);
        bad |= uly_json_set_fixed(o, "cpu_adam_s", r->lc.cpu_adam_s, 6);
        bad |= uly_json_set_fixed(o, "param_fetch_s", r->lc.param_fetch_s, 6);
        if (w->has_max) {
            bad |= uly_json_set_int(o, "max_seq_tokens", w->max_seq);
            bad |= uly_json_set_str(o, "max_seq_limit", usim_bind_name(w->max_bind));
        }
        bad |= uly_json_set_int(o, "requested_global_batch_seqs", r->requested_batch);
        json_t *warn = uly_json_add_array(o, "warnings");
        bad |= !warn;
        for (int k = 0; warn && k < r->nwarn; k++)
            bad |= uly_json_append_str(warn, r->warn[k]);
    }
    return uly_json_emit(f, root, bad, JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII | JSON_REAL_PRECISION(15));
}
