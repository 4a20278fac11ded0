/* SPDX-License-Identifier: Apache-2.0 */
/*
 * infer.c -- `ulysses-sim infer`: time to first token, time per output
 * token, memory and KV-cache capacity per GPU, and tokens per second per GPU
 * against concurrency, for TP, TP x DCP and Helix decode with a context-
 * parallel prefill (the model: sim/infer.c, doc/simulator.md "Inference").
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base_json.h"
#include "infer.h"
#include "opts.h"
#include "output.h"

int cmd_infer(int argc, char **argv);

static const char infer_usage[] =
    "usage: ulysses-sim infer [--platform P] [--model M] [--gpus G] [--scheme tp|tp-dcp|helix]\n"
    "                         [--tp T] [--dcp D] [--prefill-cp C] [--prefill-method ring|allgather|ulysses]\n"
    "                         [--prompt N] [--generate T] [--batch B] [--concurrency LIST]\n"
    "                         [--weights fp8|model] [--format table|csv|json]\n"
    "\n"
    "Predicts serving one model: the time to first token (prefill of the prompt over C\n"
    "context-parallel groups of W tensor-parallel GPUs), the time per output token (one\n"
    "decode step at context prompt + generate/2: weights and the KV-cache shard read from\n"
    "HBM, the merge collectives, the TP all-reduces), memory and KV-cache capacity per GPU,\n"
    "and tokens per second per GPU for each concurrency, each with its binding limit.\n"
    "\n"
    "  --platform P        cluster preset or file (default dgx-h100)\n"
    "  --model M           model preset or file (default llama-3-8b)\n"
    "  --gpus G            GPUs in all, a multiple of the instance's C x W (default C x W)\n"
    "  --scheme S          tp: TP T, KV heads split (copied beyond the KV heads);\n"
    "                      tp-dcp: DCP D inside the TP group, (tp // kv_heads) % dcp == 0;\n"
    "                      helix: attention TP T (T divides the KV heads) x KV-parallel D,\n"
    "                      then TP T x D for the output projection and MLP (default tp)\n"
    "  --tp T, --dcp D     degrees (default 1; at most 4096 and 64)\n"
    "  --prefill-cp C      context-parallel degree of the prefill (default 1; at most 4096);\n"
    "                      the decode merges the C groups' partials too (an all-gather)\n"
    "  --prefill-method M  ring (pass-KV, load-balanced chunks) | allgather | ulysses\n"
    "                      (default ring)\n"
    "  --prompt N          prompt tokens (default 32K; 1M = 1048576; at most 2^40)\n"
    "  --generate T        output tokens (default 1024)\n"
    "  --batch B           sequences decoded together (default 1; at most 1M)\n"
    "  --concurrency LIST  also a row per concurrency: 1:256 (doubling), 1,8,64 (at most 64)\n"
    "  --weights W         fp8: linear layers in FP8 (one byte per weight, GEMMs at twice\n"
    "                      the model dtype's peak); model: in the model's dtype (default)\n"
    "  --format F          table | csv | json (default table)\n"
    "  -h, --help          this text\n"
    "\n"
    "Every number printed is defined in doc/glossary.md; the equations in doc/simulator.md.\n";

#define MAX_CONC 64

static int64_t count_arg(const char *name, const char *v, int64_t lo, int64_t max)
{
    int64_t x;
    if (!v)
        die_usage("infer: %s needs a value", name);
    if (parse_count(v, &x) || x < lo || x > max)
        die_usage("infer: %s '%s': expected an integer in %lld..%lld", name, v, (long long)lo, (long long)max);
    return x;
}

typedef struct sweep_row {
    int64_t conc;
    usim_infer_result r;
} sweep_row;

static double sec(usim_time t)
{
    return (double)t * 1e-12;
}

static double gib(double b)
{
    return b / 1073741824.0;
}

static const char *const mem_names[3] = {"weights", "KV cache", "activations"};

static const char *const merge_labels[USIM_NMERGE] = {"decode q all-gather", "decode LSE all-gather",
                                                       "decode O reduce-scatter", "decode O+LSE all-to-all",
                                                       "decode CP all-gather"};
static const char *const merge_keys[USIM_NMERGE] = {"q_allgather", "lse_allgather", "o_reduce_scatter",
                                                     "ol_alltoall", "cp_allgather"};

static int merge_used(const usim_infer_result *r, int k)
{
    const usim_infer_job *j = &r->job;
    switch (k) {
    case USIM_MG_Q_AG: case USIM_MG_LSE_AG: case USIM_MG_O_RS:
        return j->scheme == USIM_INF_TP_DCP && j->dcp > 1;
    case USIM_MG_OL_A2A:
        return j->scheme == USIM_INF_HELIX && j->dcp > 1;
    default:
        return j->prefill_cp > 1;
    }
}

static void print_table(const usim_platform *p, const usim_model *m, const usim_infer_result *r,
                        const sweep_row *rows, int nrows)
{
    char pn[OUT_SAFE], mn[OUT_SAFE];
    const usim_infer_job *j = &r->job;
    printf("%s on %d GPUs of %s: %d instance%s of %d (prefill cp %d x tp %d, %s); decode %s, tp %d",
           out_safe(m->name, mn), j->gpus, out_safe(p->name, pn), r->replicas, r->replicas > 1 ? "s" : "",
           r->inst_gpus, j->prefill_cp, r->W, usim_pf_method_name(j->prefill_method),
           usim_inf_scheme_name(j->scheme), j->tp);
    if (j->scheme != USIM_INF_TP)
        printf(", dcp %d", j->dcp);
    printf("\nprompt %lld tokens, generate %lld, batch %lld\n\n", (long long)j->prompt, (long long)j->output,
           (long long)j->batch);
    printf("%-26s %14s %18s\n", "per layer", "time [ms]", "sent per GPU [B]");
    printf("%-26s %14.6f\n", "prefill GEMMs", sec(r->pf_gemm) * 1e3);
    printf("%-26s %14.6f\n", "prefill attention", sec(r->pf_attn) * 1e3);
    if (j->prefill_cp > 1)
        printf("%-26s %14.6f %18llu\n", "prefill CP exposed", sec(r->pf_cp) * 1e3,
               (unsigned long long)r->pf_cp_bytes);
    if (r->W > 1)
        printf("%-26s %14.6f %18llu\n", "prefill TP all-reduce", sec(r->pf_ar) * 1e3,
               (unsigned long long)r->pf_ar_bytes);
    printf("%-26s %14.6f\n", "decode GEMMs", sec(r->dec_gemm) * 1e3);
    printf("%-26s %14.6f\n", "decode attention", sec(r->dec_attn) * 1e3);
    for (int k = 0; k < USIM_NMERGE; k++)
        if (merge_used(r, k))
            printf("%-26s %14.6f %18llu\n", merge_labels[k], sec(r->dec_merge[k]) * 1e3,
                   (unsigned long long)r->dec_merge_bytes[k]);
    if (r->W > 1)
        printf("%-26s %14.6f %18llu\n", "decode TP all-reduce", sec(r->dec_ar) * 1e3,
               (unsigned long long)r->dec_ar_bytes);
    printf("\ntime to first token: %.6f s (binding limit: %s)\n", sec(r->ttft), usim_limit_name(r->pf_limit));
    printf("time per output token: %.6f ms at context %lld (binding limit: %s)\n", sec(r->tpot) * 1e3,
           (long long)r->context, usim_limit_name(r->dec_limit));
    printf("tokens/s per GPU: %.6g\n", r->tokens_per_s_gpu);
    printf("HBM read per step: weights %.0f B, KV cache %.0f B per GPU\n\n", r->dec_weight_bytes, r->dec_kv_bytes);
    printf("%-26s %14s\n", "memory per GPU", "[GiB]");
    printf("%-26s %14.3f\n", "weights", gib(r->weights));
    printf("%-26s %14.3f\n", "KV cache", gib(r->kv));
    printf("%-26s %14.3f\n", "activations", gib(r->activations));
    printf("%-26s %14.3f\n", "reserved", gib(r->reserved));
    printf("%-26s %14.3f\n", "total", gib(r->total));
    printf("%-26s %14.3f\n", "HBM", gib(r->hbm));
    printf("memory: %s (largest: %s)\n", r->fits ? "fits" : "does not fit, binding limit HBM capacity",
           mem_names[r->mem_limit]);
    printf("KV bytes per token: %.1f per GPU\n", r->kv_bytes_per_token);
    printf("KV capacity: %lld tokens (longest context at batch %lld: %lld)\n", (long long)r->kv_capacity,
           (long long)j->batch, (long long)r->max_context);
    for (int w = 0; w < r->nwarn; w++)
        printf("warning: %s\n", r->warn[w]);
    if (nrows) {
        printf("\n%11s %14s %18s %12s %5s  %s\n", "concurrency", "TPOT [ms]", "tokens/s per GPU", "KV [GiB]", "fits",
               "binding limit");
        for (int i = 0; i < nrows; i++) {
            const usim_infer_result *q = &rows[i].r;
            printf("%11lld %14.6f %18.6g %12.3f %5s  %s\n", (long long)rows[i].conc, sec(q->tpot) * 1e3,
                   q->tokens_per_s_gpu, gib(q->kv), q->fits ? "yes" : "no", usim_limit_name(q->dec_limit));
        }
    }
}

static void print_csv(const usim_platform *p, const usim_model *m, const usim_infer_result *r,
                      const sweep_row *rows, int nrows)
{
    char pn[OUT_SAFE], mn[OUT_SAFE];
    printf("platform,model,gpus,scheme,tp,dcp,prefill_cp,prefill_method,prompt,generate,concurrency,context,"
           "ttft_s,tpot_ms,tokens_per_s_gpu,weights_GiB,kv_GiB,activations_GiB,total_GiB,fits,"
           "kv_capacity_tokens,max_context,limit\n");
    sweep_row one = {r->job.batch, *r};
    if (!nrows) {
        rows = &one;
        nrows = 1;
    }
    out_safe(p->name, pn);
    out_safe(m->name, mn);
    for (int i = 0; i < nrows; i++) {
        const usim_infer_result *q = &rows[i].r;
        const usim_infer_job *j = &q->job;
        printf("%s,%s,%d,%s,%d,%d,%d,%s,%lld,%lld,%lld,%lld,%.9g,%.9g,%.9g,%.6f,%.6f,%.6f,%.6f,%d,%lld,%lld,%s\n", pn,
               mn, j->gpus, usim_inf_scheme_name(j->scheme), j->tp, j->dcp, j->prefill_cp,
               usim_pf_method_name(j->prefill_method), (long long)j->prompt, (long long)j->output,
               (long long)rows[i].conc, (long long)q->context, sec(q->ttft), sec(q->tpot) * 1e3,
               q->tokens_per_s_gpu, gib(q->weights), gib(q->kv), gib(q->activations), gib(q->total), q->fits,
               (long long)q->kv_capacity, (long long)q->max_context, usim_limit_name(q->dec_limit));
    }
}

static int print_json(const usim_platform *p, const usim_model *m, const usim_infer_result *r,
                      const sweep_row *rows, int nrows)
{
    const usim_infer_job *j = &r->job;
    json_t *o = json_object(), *pf = NULL, *dc = NULL, *me = NULL, *sw = NULL, *wa = NULL;
    int bad = !o;
    if (!bad) {
        bad |= uly_json_set_str(o, "platform", p->name);
        bad |= uly_json_set_str(o, "model", m->name);
        bad |= uly_json_set_int(o, "gpus", j->gpus);
        bad |= uly_json_set_int(o, "instances", r->replicas);
        bad |= uly_json_set_int(o, "instance_gpus", r->inst_gpus);
        bad |= uly_json_set_str(o, "scheme", usim_inf_scheme_name(j->scheme));
        bad |= uly_json_set_int(o, "tp", j->tp);
        bad |= uly_json_set_int(o, "dcp", j->dcp);
        bad |= uly_json_set_int(o, "prefill_cp", j->prefill_cp);
        bad |= uly_json_set_str(o, "prefill_method", usim_pf_method_name(j->prefill_method));
        bad |= uly_json_set_int(o, "weight_group_gpus", r->W);
        bad |= uly_json_set_int(o, "kv_parallel", r->kvp);
        bad |= uly_json_set_int(o, "prompt", j->prompt);
        bad |= uly_json_set_int(o, "generate", j->output);
        bad |= uly_json_set_int(o, "batch", j->batch);
        bad |= uly_json_set_str(o, "weights", j->fp8_weights ? "fp8" : usim_dtype_name(m->dtype));
        bad |= uly_json_set_int(o, "context", r->context);
        bad |= !(pf = uly_json_add_object(o, "prefill"));
        bad |= !(dc = uly_json_add_object(o, "decode"));
        bad |= !(me = uly_json_add_object(o, "memory"));
        bad |= !(sw = uly_json_add_array(o, "concurrency"));
        bad |= !(wa = uly_json_add_array(o, "warnings"));
    }
    if (!bad) {
        bad |= uly_json_set_real(pf, "gemm_ms", sec(r->pf_gemm) * 1e3);
        bad |= uly_json_set_real(pf, "attention_ms", sec(r->pf_attn) * 1e3);
        bad |= uly_json_set_real(pf, "cp_exposed_ms", sec(r->pf_cp) * 1e3);
        bad |= uly_json_set_real(pf, "tp_allreduce_ms", sec(r->pf_ar) * 1e3);
        bad |= uly_json_set_real(pf, "layer_ms", sec(r->pf_layer) * 1e3);
        bad |= uly_json_set_int(pf, "cp_bytes", (int64_t)r->pf_cp_bytes);
        bad |= uly_json_set_int(pf, "tp_allreduce_bytes", (int64_t)r->pf_ar_bytes);
        bad |= uly_json_set_int(pf, "ttft_ps", r->ttft);
        bad |= uly_json_set_real(pf, "ttft_s", sec(r->ttft));
        bad |= uly_json_set_real(pf, "flops_per_gpu", r->pf_flops);
        bad |= uly_json_set_str(pf, "limit", usim_limit_name(r->pf_limit));
        bad |= uly_json_set_real(dc, "gemm_ms", sec(r->dec_gemm) * 1e3);
        bad |= uly_json_set_real(dc, "attention_ms", sec(r->dec_attn) * 1e3);
        for (int k = 0; k < USIM_NMERGE; k++) {
            char key[64];
            snprintf(key, sizeof key, "%s_ms", merge_keys[k]);
            bad |= uly_json_set_real(dc, key, sec(r->dec_merge[k]) * 1e3);
            snprintf(key, sizeof key, "%s_bytes", merge_keys[k]);
            bad |= uly_json_set_int(dc, key, (int64_t)r->dec_merge_bytes[k]);
        }
        bad |= uly_json_set_real(dc, "tp_allreduce_ms", sec(r->dec_ar) * 1e3);
        bad |= uly_json_set_int(dc, "tp_allreduce_bytes", (int64_t)r->dec_ar_bytes);
        bad |= uly_json_set_real(dc, "layer_ms", sec(r->dec_layer) * 1e3);
        bad |= uly_json_set_int(dc, "tpot_ps", r->tpot);
        bad |= uly_json_set_real(dc, "tpot_ms", sec(r->tpot) * 1e3);
        bad |= uly_json_set_real(dc, "weight_read_bytes", r->dec_weight_bytes);
        bad |= uly_json_set_real(dc, "kv_read_bytes", r->dec_kv_bytes);
        bad |= uly_json_set_real(dc, "tokens_per_s_gpu", r->tokens_per_s_gpu);
        bad |= uly_json_set_str(dc, "limit", usim_limit_name(r->dec_limit));
        bad |= uly_json_set_real(me, "weights_bytes", r->weights);
        bad |= uly_json_set_real(me, "kv_bytes", r->kv);
        bad |= uly_json_set_real(me, "activations_bytes", r->activations);
        bad |= uly_json_set_real(me, "reserved_bytes", r->reserved);
        bad |= uly_json_set_real(me, "total_bytes", r->total);
        bad |= uly_json_set_real(me, "hbm_bytes", r->hbm);
        bad |= uly_json_set_bool(me, "fits", r->fits);
        bad |= uly_json_set_str(me, "largest", mem_names[r->mem_limit]);
        bad |= uly_json_set_real(me, "kv_bytes_per_token", r->kv_bytes_per_token);
        bad |= uly_json_set_int(me, "kv_capacity_tokens", r->kv_capacity);
        bad |= uly_json_set_int(me, "max_context", r->max_context);
    }
    for (int i = 0; i < nrows && !bad; i++) {
        const usim_infer_result *q = &rows[i].r;
        json_t *x = uly_json_append_object(sw);
        bad |= !x;
        if (x) {
            bad |= uly_json_set_int(x, "concurrency", rows[i].conc);
            bad |= uly_json_set_real(x, "tpot_ms", sec(q->tpot) * 1e3);
            bad |= uly_json_set_real(x, "tokens_per_s_gpu", q->tokens_per_s_gpu);
            bad |= uly_json_set_real(x, "kv_bytes", q->kv);
            bad |= uly_json_set_bool(x, "fits", q->fits);
            bad |= uly_json_set_str(x, "limit", usim_limit_name(q->dec_limit));
        }
    }
    for (int w = 0; w < r->nwarn && !bad; w++)
        bad |= uly_json_append_str(wa, r->warn[w]);
    return uly_json_emit(stdout, o, bad, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII |
                                         JSON_REAL_PRECISION(12));
}

int cmd_infer(int argc, char **argv)
{
    const char *platform = "dgx-h100", *model = "llama-3-8b";
    usim_infer_job j;
    memset(&j, 0, sizeof j);
    j.scheme = USIM_INF_TP;
    j.tp = j.dcp = j.prefill_cp = 1;
    j.prefill_method = USIM_PF_RING;
    j.prompt = 32768;
    j.output = 1024;
    j.batch = 1;
    int format = FMT_TABLE, nconc = 0;
    int64_t conc[MAX_CONC];
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(infer_usage, stdout);
            return 0;
        }
        if (strncmp(a, "--", 2) != 0)
            die_usage("infer: unexpected argument '%s' (see ulysses-sim infer --help)", a);
        if (!v)
            die_usage("infer: %s needs a value", a);
        if (!strcmp(a, "--platform")) {
            platform = v;
        } else if (!strcmp(a, "--model")) {
            model = v;
        } else if (!strcmp(a, "--gpus")) {
            j.gpus = (int)count_arg(a, v, 1, 1 << 20);
        } else if (!strcmp(a, "--scheme")) {
            if (usim_inf_scheme_parse(v, &j.scheme))
                die_usage("infer: %s", usim_last_error());
        } else if (!strcmp(a, "--tp")) {
            j.tp = (int)count_arg(a, v, 1, 4096);
        } else if (!strcmp(a, "--dcp")) {
            j.dcp = (int)count_arg(a, v, 1, 64);
        } else if (!strcmp(a, "--prefill-cp")) {
            j.prefill_cp = (int)count_arg(a, v, 1, 4096);
        } else if (!strcmp(a, "--prefill-method")) {
            if (usim_pf_method_parse(v, &j.prefill_method))
                die_usage("infer: %s", usim_last_error());
        } else if (!strcmp(a, "--prompt")) {
            j.prompt = count_arg(a, v, 1, (int64_t)1 << 40);
        } else if (!strcmp(a, "--generate")) {
            j.output = count_arg(a, v, 1, (int64_t)1 << 40);
        } else if (!strcmp(a, "--batch")) {
            j.batch = count_arg(a, v, 1, 1 << 20);
        } else if (!strcmp(a, "--concurrency")) {
            if (parse_list(v, conc, MAX_CONC, &nconc))
                die_usage("infer: --concurrency '%s': expected a list 1,8,64 or a range 1:256 of at most %d values",
                          v, MAX_CONC);
            for (int k = 0; k < nconc; k++)
                if (conc[k] < 1 || conc[k] > (1 << 20))
                    die_usage("infer: --concurrency: %lld is not in 1..1048576", (long long)conc[k]);
        } else if (!strcmp(a, "--weights")) {
            if (!strcmp(v, "fp8")) j.fp8_weights = 1;
            else if (!strcmp(v, "model")) j.fp8_weights = 0;
            else die_usage("infer: --weights '%s': expected fp8 or model", v);
        } else if (!strcmp(a, "--format")) {
            if (!strcmp(v, "table")) format = FMT_TABLE;
            else if (!strcmp(v, "csv")) format = FMT_CSV;
            else if (!strcmp(v, "json")) format = FMT_JSON;
            else die_usage("infer: --format '%s': expected table, csv or json", v);
        } else {
            die_usage("infer: unknown option '%s' (see ulysses-sim infer --help)", a);
        }
        i++;
    }
    if (j.scheme == USIM_INF_TP && j.dcp != 1)
        die_usage("infer: --dcp %d needs --scheme tp-dcp or helix", j.dcp);
    opts o;
    opts_defaults(&o);
    o.platform = platform;
    o.model = model;
    usim_platform p;
    usim_model m;
    load_inputs(&o, &p, &m);
    usim_infer_result r;
    int rc = usim_infer_simulate(&p, &m, &j, &r);
    if (rc == USIM_EINVAL)
        die_usage("infer: %s", usim_last_error());
    if (rc) {
        fprintf(stderr, "ulysses-sim: infer: %s\n", usim_last_error());
        return 1;
    }
    sweep_row *rows = nconc ? calloc((size_t)nconc, sizeof *rows) : NULL;
    if (nconc && !rows) {
        fprintf(stderr, "ulysses-sim: infer: out of memory\n");
        return 1;
    }
    for (int k = 0; k < nconc; k++) {
        usim_infer_job q = j;
        q.batch = conc[k];
        rows[k].conc = conc[k];
        rc = usim_infer_simulate(&p, &m, &q, &rows[k].r);
        if (rc) {
            free(rows);
            if (rc == USIM_EINVAL)
                die_usage("infer: concurrency %lld: %s", (long long)conc[k], usim_last_error());
            fprintf(stderr, "ulysses-sim: infer: %s\n", usim_last_error());
            return 1;
        }
    }
    for (int w = 0; w < r.nwarn && format != FMT_TABLE; w++)
        fprintf(stderr, "ulysses-sim: warning: %s\n", r.warn[w]);
    if (format == FMT_JSON) {
        if (print_json(&p, &m, &r, rows, nconc)) {
            fprintf(stderr, "ulysses-sim: infer: cannot write the JSON output (out of memory or write error)\n");
            free(rows);
            return 1;
        }
    } else if (format == FMT_CSV) {
        print_csv(&p, &m, &r, rows, nconc);
    } else {
        print_table(&p, &m, &r, rows, nconc);
    }
    free(rows);
    if (fflush(stdout)) {
        fprintf(stderr, "ulysses-sim: error writing the output\n");
        return 1;
    }
    return 0;
}
