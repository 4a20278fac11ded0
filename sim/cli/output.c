/*
 * output.c -- table, CSV and JSON output of ulysses-sim.
 */
#include <string.h>

#include "output.h"

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
    fprintf(f, "%s on %d GPUs of %s, %lld tokens per sequence, %s\n", m->name,
            r0 ? r0->job.gpus : 0, p->name, (long long)m->seq, usim_dtype_name(m->dtype));
    if (r0)
        fprintf(f, "global batch %lld sequences (%d micro-steps of %lld), ZeRO-%d, recompute %s\n\n",
                (long long)r0->global_batch, r0->micro_steps, (long long)m->micro_batch, r0->job.zero,
                usim_recompute_name(r0->job.recompute));
    char buf[64];
    fprintf(f, "%-38s", "");
    for (int i = 0; i < n; i++)
        cell(f, usim_method_name(rows[i].method));
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
        composed |= rows[i].ok && ((rows[i].r.job.tp > 1 && rows[i].method != USIM_MEGATRON_SP) ||
                                   rows[i].r.job.pp > 1);
    if (!composed)
        ROW("degrees sp x dp (ulysses x ring)", {
            if (r->job.method == USIM_USP)
                snprintf(buf, sizeof buf, "%dx%d (%dx%d)", r->job.sp, r->job.dp, r->job.ulysses,
                         r->job.sp / r->job.ulysses);
            else
                snprintf(buf, sizeof buf, "%dx%d", r->job.sp, r->job.dp);
        });
    else
        ROW("degrees tp x sp x pp x dp", {
            int t = r->job.method == USIM_MEGATRON_SP ? r->job.tp : r->job.tp;
            int c = r->job.method == USIM_MEGATRON_SP ? 1 : r->job.sp;
            snprintf(buf, sizeof buf, "%dx%dx%dx%d", t, c, r->job.pp, r->job.dp);
        });
    ROW("iteration time [s]", snprintf(buf, sizeof buf, "%.3f", r->iter_s));
    ROW("compute time [s]", snprintf(buf, sizeof buf, "%.3f", r->compute_s));
    ROW("exposed comm: sequence parallel [s]", snprintf(buf, sizeof buf, "%.3f", r->exposed_s[USIM_KIND_SP]));
    ROW("exposed comm: parameter gather [s]", snprintf(buf, sizeof buf, "%.3f", r->exposed_s[USIM_KIND_PARAM]));
    ROW("exposed comm: gradient reduce [s]", snprintf(buf, sizeof buf, "%.3f", r->exposed_s[USIM_KIND_GRAD]));
    if (composed)
        ROW("pipeline bubble [s]", snprintf(buf, sizeof buf, "%.3f", r->bubble_s));
    ROW("SP comm per layer forward [MB/GPU]", snprintf(buf, sizeof buf, "%.1f", r->sp_bytes_layer_fwd / 1e6));
    ROW("sent over NVLink [GB/GPU/iter]", snprintf(buf, sizeof buf, "%.2f", r->sent_bytes[USIM_CLASS_NVLINK] / 1e9));
    ROW("sent over NIC [GB/GPU/iter]", snprintf(buf, sizeof buf, "%.2f", r->sent_bytes[USIM_CLASS_NIC] / 1e9));
    ROW("throughput, Megatron formula [TFLOP/s/GPU]", snprintf(buf, sizeof buf, "%.1f", r->tflops));
    ROW("MFU (model FLOPs / peak) [%]", snprintf(buf, sizeof buf, "%.1f", 100 * r->mfu));
    ROW("memory per GPU [GiB]", snprintf(buf, sizeof buf, "%.1f", r->mem.total / GIB));
    ROW("  activations + logits [GiB]", snprintf(buf, sizeof buf, "%.1f", (r->mem.activations + r->mem.logits) / GIB));
    ROW("  params + grads + optimizer [GiB]", snprintf(buf, sizeof buf, "%.1f", (r->mem.params + r->mem.grads + r->mem.optim) / GIB));
    ROW("simulation engine", usim_engine_desc(r, buf, sizeof buf));
    snprintf(buf, sizeof buf, "fits in %.0f GiB [yes/no]", p->hbm_bytes / GIB);
    char label[64];
    snprintf(label, sizeof label, "%s", buf);
    ROW(label, snprintf(buf, sizeof buf, "%s", r->fits ? "yes" : "NO (OOM)"));
    int any_max = 0;
    for (int i = 0; i < n; i++)
        any_max |= rows[i].has_max;
    if (any_max)
        ROW("longest sequence that fits [tokens]", snprintf(buf, sizeof buf, "%lld", (long long)rows[i].max_seq));
#undef ROW
    int zig = 0;
    for (int i = 0; i < n; i++)
        zig |= rows[i].ok && rows[i].method == USIM_RING_ZIGZAG;
    if (zig && m->causal && !p->attn_causal_skip)
        fprintf(f, "\nnote: %s's attention kernels compute masked blocks "
                   "(attention_skips_masked_blocks = false), so zigzag balancing saves no work",
                p->name);
    for (int i = 0; i < n; i++)
        if (!rows[i].ok)
            fprintf(f, "\n%s: not run: %s", usim_method_name(rows[i].method), rows[i].err);
    if (composed)
        for (int i = 0; i < n; i++)
            if (rows[i].ok) {
                char pl[256];
                usim_job_placement(p, &rows[i].r.job, pl, sizeof pl);
                fprintf(f, "\nplacement: %s: %s", usim_method_name(rows[i].method), pl);
            }
    for (int i = 0; i < n; i++)
        for (int k = 0; rows[i].ok && k < rows[i].r.nwarn; k++)
            fprintf(f, "\nwarning: %s: %s", usim_method_name(rows[i].method), rows[i].r.warn[k]);
    fputc('\n', f);
}

void out_csv_header(FILE *f)
{
    /* columns are only ever appended, so scripts that cut fields keep working */
    fputs("method,platform,model,gpus,sp,tp,dp,ulysses_degree,ring_degree,zero,recompute,"
          "seq_tokens,global_batch_seqs,micro_steps,iter_s,compute_s,exposed_sp_s,exposed_param_s,"
          "exposed_grad_s,sp_bytes_layer_fwd_B,nvlink_sent_GB,nic_sent_GB,tflops_per_gpu,mfu_pct,"
          "mem_GiB,fits,max_seq_tokens,error,warnings,pp,bubble_s,placement,engine\n", f);
}

static void csv_str(FILE *f, const char *s);

/* A name field: quoted only when it needs to be. */
static void csv_name(FILE *f, const char *s)
{
    if (strpbrk(s, ",\"\n\r"))
        csv_str(f, s);
    else
        fputs(s, f);
}

static void csv_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

void out_csv_row(FILE *f, const usim_platform *p, const usim_model *m, int gpus, const row *w)
{
    const usim_result *r = &w->r;
    fprintf(f, "%s,", usim_method_name(w->method));
    csv_name(f, p->name);
    fputc(',', f);
    csv_name(f, m->name);
    fprintf(f, ",%d,", gpus);
    if (!w->ok) {
        fprintf(f, ",,,,,,,%lld,,,,,,,,,,,,,,,,", (long long)m->seq);
        csv_str(f, w->err);
        fputs(",,,,,\n", f);
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
    fputc('\n', f);
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", *s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

void out_json(FILE *f, const usim_platform *p, const usim_model *m, int gpus, const row *rows, int n)
{
    fprintf(f, "{\n  \"platform\": ");
    json_str(f, p->name);
    fprintf(f, ",\n  \"model\": ");
    json_str(f, m->name);
    fprintf(f, ",\n  \"gpus\": %d,\n  \"seq_tokens\": %lld,\n  \"results\": [", gpus, (long long)m->seq);
    for (int i = 0; i < n; i++) {
        const row *w = &rows[i];
        const usim_result *r = &w->r;
        fprintf(f, "%s\n    {\"method\": \"%s\", ", i ? "," : "", usim_method_name(w->method));
        if (!w->ok) {
            fprintf(f, "\"error\": ");
            json_str(f, w->err);
            fputc('}', f);
            continue;
        }
        char pl[256];
        usim_job_placement(p, &r->job, pl, sizeof pl);
        fprintf(f, "\"pp\": %d, \"bubble_s\": %.6f, \"placement\": ", r->job.pp, r->bubble_s);
        json_str(f, pl);
        char eng[160];
        usim_engine_desc(r, eng, sizeof eng);
        fprintf(f, ", \"engine\": ");
        json_str(f, eng);
        fprintf(f, ",\n     ");
        fprintf(f, "\"sp\": %d, \"tp\": %d, \"dp\": %d, \"ulysses_degree\": %d, \"ring_degree\": %d, "
                   "\"zero\": %d, \"recompute\": \"%s\", \"global_batch_seqs\": %lld, \"micro_steps\": %d,\n"
                   "     \"iter_s\": %.6f, \"compute_s\": %.6f, \"exposed_sp_s\": %.6f, "
                   "\"exposed_param_s\": %.6f, \"exposed_grad_s\": %.6f,\n"
                   "     \"sp_bytes_layer_fwd_B\": %.0f, \"nvlink_sent_GB\": %.4f, \"nic_sent_GB\": %.4f, "
                   "\"tflops_per_gpu\": %.2f, \"mfu_pct\": %.2f,\n"
                   "     \"mem_GiB\": %.3f, \"mem_params_GiB\": %.3f, \"mem_grads_GiB\": %.3f, "
                   "\"mem_optim_GiB\": %.3f, \"mem_activations_GiB\": %.3f, \"mem_logits_GiB\": %.3f, "
                   "\"mem_buffers_GiB\": %.3f, \"fits\": %s",
                r->job.sp, r->job.tp, r->job.dp, r->job.ulysses, r->job.sp / r->job.ulysses,
                r->job.zero, usim_recompute_name(r->job.recompute), (long long)r->global_batch,
                r->micro_steps, r->iter_s, r->compute_s, r->exposed_s[0], r->exposed_s[1],
                r->exposed_s[2], r->sp_bytes_layer_fwd, r->sent_bytes[0] / 1e9,
                r->sent_bytes[1] / 1e9, r->tflops, 100 * r->mfu, r->mem.total / GIB,
                r->mem.params / GIB, r->mem.grads / GIB, r->mem.optim / GIB,
                r->mem.activations / GIB, r->mem.logits / GIB, r->mem.buffers / GIB,
                r->fits ? "true" : "false");
        if (w->has_max)
            fprintf(f, ", \"max_seq_tokens\": %lld", (long long)w->max_seq);
        fprintf(f, ",\n     \"requested_global_batch_seqs\": %lld, \"warnings\": [",
                (long long)r->requested_batch);
        for (int k = 0; k < r->nwarn; k++) {
            if (k)
                fputs(", ", f);
            json_str(f, r->warn[k]);
        }
        fputs("]}", f);
    }
    fprintf(f, "\n  ]\n}\n");
}
