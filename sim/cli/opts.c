/* SPDX-License-Identifier: Apache-2.0 */
/*
 * opts.c -- option parsing for ulysses-sim (see opts.h).
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opts.h"
#include "base/base.h"
#include "hfconfig.h"

void die_usage(const char *fmt, ...)
{
    va_list ap;
    fputs("ulysses-sim: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(EXIT_BADINPUT);
}

static char opt_err[512];

const char *opts_error(void)
{
    return opt_err;
}

/* Record a bad-input message for opts_error() and return EXIT_BADINPUT. */
static int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(opt_err, sizeof opt_err, fmt, ap);
    va_end(ap);
    return EXIT_BADINPUT;
}

void opts_defaults(opts *o)
{
    memset(o, 0, sizeof *o);
    o->platform = "dgx-a100-40g";
    o->model = "gpt-7b";
    o->zero = 3;
    o->recompute = USIM_RC_FULL;
    o->a2a = USIM_A2A_DIRECT;
    o->format = FMT_TABLE;
    /* the default comparison: the methods of the DeepSpeed-Ulysses paper and USP
     * (all-gather CP runs when named, or with --method all) */
    for (int i = 0; i < ULY_METHOD_ALL; i++)
        if (usim_method_order[i] != ULY_METHOD_ALLGATHER)
            o->methods[o->nmethods++] = usim_method_order[i];
}

int parse_count(const char *s, int64_t *out)
{
    /* the integer syntax of both programs (src/base); negative or zero
     * counts are the callers' range checks */
    return uly_parse_int(s, out) ? -1 : 0;
}

int parse_list(const char *s, int64_t *out, int max, int *n)
{
    *n = 0;
    char buf[1024];
    if (strlen(s) >= sizeof buf)
        return -1;
    strcpy(buf, s);
    if (strchr(buf, ':')) {
        char *a = buf, *b = strchr(a, ':'), *c;
        *b++ = 0;
        c = strchr(b, ':');
        if (c)
            *c++ = 0;
        int64_t lo, hi, step = 2;
        int add = 0;
        if (parse_count(a, &lo) || parse_count(b, &hi) || lo < 1 || hi < lo)
            return -1;
        if (c) {
            if (*c == 'x' || *c == '*') {
                if (parse_count(c + 1, &step) || step < 2)
                    return -1;
            } else if (*c == '+') {
                if (parse_count(c + 1, &step) || step < 1)
                    return -1;
                add = 1;
            } else {
                return -1;
            }
        }
        for (int64_t v = lo; v <= hi;) {
            if (*n >= max)
                return -1;
            out[(*n)++] = v;
            if (add) {
                if (v > INT64_MAX - step)
                    break;
                v += step;
            } else {
                if (v > INT64_MAX / step)
                    break;
                v *= step;
            }
        }
        return *n > 0 ? 0 : -1;
    }
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (*n >= max || parse_count(tok, &out[*n]) || out[*n] < 1)
            return -1;
        (*n)++;
    }
    return *n > 0 ? 0 : -1;
}

static int parse_int_opt(const char *name, const char *v, int lo, int hi, int *out)
{
    int64_t x;
    if (parse_count(v, &x) || x < lo || x > hi)
        return fail("%s: expected an integer in [%d, %d], got '%s'", name, lo, hi, v);
    *out = (int)x;
    return 0;
}

/* Integer options stored in an int field of opts. */
struct int_opt {
    const char *name;
    size_t off;
    int lo, hi;
};

static const struct int_opt *int_option(const char *name)
{
    static const struct int_opt table[] = {
        {"--sp", offsetof(opts, sp), 1, 1 << 20},
        {"--tp", offsetof(opts, tp), 1, 1 << 20},
        {"--pp", offsetof(opts, pp), 1, 1 << 20},
        {"--dp", offsetof(opts, dp), 1, 1 << 20},
        {"--ulysses", offsetof(opts, ulysses), 1, 1 << 20},
        {"--zero", offsetof(opts, zero), 0, 3},
        {"--vpp", offsetof(opts, vpp), 1, 1 << 20},
        {"--pp-first-layers", offsetof(opts, pp_first_layers), 1, 100000},
        {"--pp-last-layers", offsetof(opts, pp_last_layers), 1, 100000},
    };
    for (size_t k = 0; k < sizeof table / sizeof table[0]; k++)
        if (strcmp(name, table[k].name) == 0)
            return &table[k];
    return NULL;
}

static int parse_methods(opts *o, const char *v)
{
    if (strcmp(v, "all") == 0) {
        for (int i = 0; i < ULY_METHOD_ALL; i++)
            o->methods[i] = usim_method_order[i];
        o->nmethods = ULY_METHOD_ALL;
        return 0;
    }
    char buf[256];
    if (strlen(v) >= sizeof buf)
        return fail("--method: list too long");
    strcpy(buf, v);
    o->nmethods = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        int m;
        if (uly_method_parse_any(tok, &m)) {
            /* the names accepted, in the simulator's order */
            char names[160] = "";
            for (int i = 0; i < ULY_METHOD_ALL; i++)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "",
                         uly_method_sim_name(usim_method_order[i]));
            char raw[1024], safe[1024];   /* the name as given, made safe to print */
            snprintf(raw, sizeof raw, "unknown method '%s' (%s; Megatron cp_comm_type a2a, p2p, all_gather, "
                     "a2a+p2p)", tok, names);
            uly_sanitize(safe, sizeof safe, raw);
            return fail("--method: %s", safe);
        }
        for (int i = 0; i < o->nmethods; i++)
            if ((int)o->methods[i] == m)
                return fail("--method: '%s' listed twice", tok);
        o->methods[o->nmethods++] = (uly_method)m;
    }
    if (o->nmethods == 0)
        return fail("--method: empty list");
    o->methods_explicit = 1;
    return 0;
}

/* --trace-ranks: "all", or a list of GPUs and ranges "0,3" "0-7" "0-3,8";
 * at most USIM_TRACE_MAX_GPUS GPUs, each listed once. */
static int parse_trace_ranks(opts *o, const char *val)
{
    o->ntrace_ranks = 0;
    o->trace_ranks_all = 0;
    if (strcmp(val, "all") == 0) {
        o->trace_ranks_all = 1;
        return 0;
    }
    const char *p = val;
    for (;;) {
        char *end;
        long lo, hi;
        if (*p < '0' || *p > '9')
            goto syntax;
        errno = 0;
        lo = strtol(p, &end, 10);
        hi = lo;
        if (*end == '-') {
            p = end + 1;
            if (*p < '0' || *p > '9')
                goto syntax;
            hi = strtol(p, &end, 10);
        }
        if (errno || lo >= 1048576 || hi >= 1048576)
            return fail("--trace-ranks: '%s': GPUs are numbered 0 to at most 1048575", val);
        if (hi < lo)
            return fail("--trace-ranks: range %ld-%ld is empty (write the smaller GPU first)", lo, hi);
        if (hi - lo + 1 > USIM_TRACE_MAX_GPUS - o->ntrace_ranks)
            return fail("--trace-ranks: '%s' names more than the %d GPUs one trace holds", val,
                        USIM_TRACE_MAX_GPUS);
        for (long g = lo; g <= hi; g++) {
            for (int k = 0; k < o->ntrace_ranks; k++)
                if (o->trace_ranks[k] == g)
                    return fail("--trace-ranks: GPU %ld is listed twice in '%s'", g, val);
            o->trace_ranks[o->ntrace_ranks++] = (int)g;
        }
        if (*end == 0)
            break;
        if (*end != ',')
            goto syntax;
        p = end + 1;
    }
    /* sorted: the trace's processes in GPU order */
    for (int a = 1; a < o->ntrace_ranks; a++)
        for (int b = a; b > 0 && o->trace_ranks[b - 1] > o->trace_ranks[b]; b--) {
            int t = o->trace_ranks[b];
            o->trace_ranks[b] = o->trace_ranks[b - 1];
            o->trace_ranks[b - 1] = t;
        }
    return 0;
syntax:
    return fail("--trace-ranks: expected all, or GPUs and ranges like 0,3 or 0-7, got '%s'", val);
}

int opts_parse(opts *o, int argc, char **argv, int first, int mode, int *help)
{
    *help = 0;
    int sweep = mode == OPTS_SWEEP;
    for (int i = first; i < argc; i++) {
        char *arg = argv[i];
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            *help = 1;
            return 0;
        }
        if (strncmp(arg, "--", 2) != 0)
            return fail("unexpected argument '%s' (see --help)", arg);
        char name[64];
        const char *val = NULL;
        const char *eq = strchr(arg, '=');
        if (eq) {
            size_t l = (size_t)(eq - arg);
            if (l >= sizeof name)
                return fail("unknown option '%s' (see --help)", arg);
            memcpy(name, arg, l);
            name[l] = 0;
            val = eq + 1;
        } else {
            snprintf(name, sizeof name, "%s", arg);
        }
        /* flags without a value */
        if (strcmp(name, "--max-seq") == 0 && !val) {
            o->max_seq = 1;
            continue;
        }
        if (strcmp(name, "--attn-dropout") == 0 && !val) {
            o->attn_dropout = 1;
            continue;
        }
        if (strcmp(name, "--tiled-loss") == 0 && !val) {
            o->tiled_loss = 1;
            continue;
        }
        if (strcmp(name, "--tiled-mlp") == 0 && !val) {
            /* an optional value: K or auto as the next word, else auto */
            const char *nx = i + 1 < argc ? argv[i + 1] : NULL;
            if (nx && (strcmp(nx, "auto") == 0 || (nx[0] >= '0' && nx[0] <= '9')))
                val = argv[++i];
            else {
                o->tiled_mlp = USIM_TILED_MLP_AUTO;
                continue;
            }
        }
        if (strcmp(name, "--tiled-mlp") == 0) {
            if (strcmp(val, "auto") == 0)
                o->tiled_mlp = USIM_TILED_MLP_AUTO;
            else if (parse_int_opt(name, val, 1, 1 << 24, &o->tiled_mlp))
                return fail("--tiled-mlp: expected auto or a shard count K in [1, %d], got '%s'", 1 << 24, val);
            continue;
        }
        if ((strcmp(name, "--no-progress") == 0 || strcmp(name, "--quiet") == 0) && (sweep || mode == OPTS_PLAN) &&
            !val) {
            o->no_progress = 1;
            continue;
        }
        static const char *const valued[] = {
            "--platform", "--model", "--gpus", "--seq", "--method", "--sp", "--cp", "--tp", "--pp", "--dp",
            "--ulysses", "--zero", "--recompute", "--a2a", "--micro-batch", "--global-batch",
            "--layers", "--format", "--engine", "--trace", "--out", "--plot", "--plot-metric", "--seq-per-gpu",
            "--top", "--mem-headroom", "--trace-ranks", "--offload", "--head-chunks", "--vpp",
            "--pp-first-layers", "--pp-last-layers", "--attn-kernel", NULL};
        int known = 0;
        for (int k = 0; valued[k]; k++)
            if (strcmp(name, valued[k]) == 0)
                known = 1;
        if (!known)
            return fail("unknown option '%s' (see --help)", name);
        if (!val) {
            if (i + 1 >= argc)
                return fail("%s needs a value", name);
            val = argv[++i];
        }
        if (strcmp(name, "--platform") == 0) o->platform = val;
        else if (strcmp(name, "--model") == 0) o->model = val;
        else if (strcmp(name, "--gpus") == 0) {
            if (parse_list(val, o->gpus, sweep ? MAX_LIST : 1, &o->ngpus))
                return fail("--gpus: expected %s, got '%s'",
                          sweep ? "a positive count, a list a,b,c or a range a:b" : "a positive integer", val);
            for (int k = 0; k < o->ngpus; k++)
                if (o->gpus[k] > 1048576)
                    return fail("--gpus: %lld is more than 1048576", (long long)o->gpus[k]);
        } else if (strcmp(name, "--seq") == 0) {
            if (parse_list(val, o->seqs, sweep ? MAX_LIST : 1, &o->nseqs))
                return fail("--seq: expected %s, got '%s'",
                          sweep ? "a positive count (128K allowed), a list or a range a:b" :
                                  "a positive token count (e.g. 131072 or 128K)", val);
            for (int k = 0; k < o->nseqs; k++)
                if (o->seqs[k] > ((int64_t)1 << 40))
                    return fail("--seq: %lld is more than 2^40 = 1099511627776 tokens", (long long)o->seqs[k]);
        }
        else if (sweep && (strcmp(name, "--sp") == 0 || strcmp(name, "--cp") == 0 ||
                           strcmp(name, "--tp") == 0 || strcmp(name, "--pp") == 0)) {
            /* sweep: a list or range of degrees */
            int64_t *lst = name[2] == 't' ? o->tps : name[2] == 'p' ? o->pps : o->sps;
            int *cnt = name[2] == 't' ? &o->ntps : name[2] == 'p' ? &o->npps : &o->nsps;
            int *head = name[2] == 't' ? &o->tp : name[2] == 'p' ? &o->pp : &o->sp;
            if (parse_list(val, lst, 64, cnt))
                return fail("%s: expected a positive degree, a list a,b,c or a range a:b (at most 64 "
                            "values), got '%s'", name, val);
            for (int k = 0; k < *cnt; k++)
                if (lst[k] > 1 << 20)
                    return fail("%s: %lld is more than %d", name, (long long)lst[k], 1 << 20);
            *head = (int)lst[0];
        }
        else if (strcmp(name, "--method") == 0) {
            if (parse_methods(o, val))
                return EXIT_BADINPUT;
        } else if (int_option(strcmp(name, "--cp") == 0 ? "--sp" : name)) {
            const struct int_opt *io = int_option(strcmp(name, "--cp") == 0 ? "--sp" : name);
            if (parse_int_opt(name, val, io->lo, io->hi, (int *)((char *)o + io->off)))
                return EXIT_BADINPUT;
            if (strcmp(name, "--zero") == 0)
                o->zero_set = 1;
        }
        else if (strcmp(name, "--offload") == 0) {
            /* a list of activations, optimizer, params (or none) */
            char buf[128];
            if (strlen(val) >= sizeof buf)
                return fail("--offload: list too long");
            strcpy(buf, val);
            o->offload = 0;
            for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
                int bit = strcmp(tok, "activations") == 0 ? USIM_OFFLOAD_ACT
                        : strcmp(tok, "optimizer") == 0 ? USIM_OFFLOAD_OPTIM
                        : strcmp(tok, "params") == 0 ? USIM_OFFLOAD_PARAMS
                        : strcmp(tok, "none") == 0 ? 0 : -1;
                if (bit < 0) {
                    char safe[160];
                    uly_sanitize(safe, sizeof safe, tok);
                    return fail("--offload: unknown item '%s' (expected activations, optimizer, params or none)",
                                safe);
                }
                if (bit && (o->offload & bit))
                    return fail("--offload: '%s' listed twice", tok);
                o->offload |= bit;
            }
        } else if (strcmp(name, "--attn-kernel") == 0) {
            if (strcmp(val, "flash") == 0) o->attn_kernel = USIM_ATTN_FLASH;
            else if (strcmp(val, "unfused") == 0) o->attn_kernel = USIM_ATTN_UNFUSED;
            else return fail("--attn-kernel: expected flash or unfused, got '%s'", val);
        } else if (strcmp(name, "--head-chunks") == 0) {
            if (parse_int_opt(name, val, 1, 1 << 20, &o->head_chunks))
                return EXIT_BADINPUT;
        }
        else if (strcmp(name, "--recompute") == 0) {
            if (strcmp(val, "none") == 0) o->recompute = USIM_RC_NONE;
            else if (strcmp(val, "selective") == 0) o->recompute = USIM_RC_SELECTIVE;
            else if (strcmp(val, "full") == 0) o->recompute = USIM_RC_FULL;
            else return fail("--recompute: expected none, selective or full, got '%s'", val);
            o->recompute_set = 1;
        } else if (strcmp(name, "--a2a") == 0) {
            if (strcmp(val, "direct") == 0) o->a2a = USIM_A2A_DIRECT;
            else if (strcmp(val, "pairwise") == 0) o->a2a = USIM_A2A_PAIRWISE;
            else return fail("--a2a: expected direct or pairwise, got '%s'", val);
        } else if (strcmp(name, "--micro-batch") == 0) {
            if (parse_count(val, &o->micro_batch) || o->micro_batch < 1 || o->micro_batch > 1 << 20)
                return fail("--micro-batch: expected a positive integer, got '%s'", val);
        } else if (strcmp(name, "--global-batch") == 0) {
            if (parse_count(val, &o->global_batch) || o->global_batch < 1 || o->global_batch > 1 << 30)
                return fail("--global-batch: expected a positive integer, got '%s'", val);
        } else if (strcmp(name, "--layers") == 0) {
            if (parse_count(val, &o->layers) || o->layers < 1 || o->layers > 100000)
                return fail("--layers: expected a positive integer, got '%s'", val);
        } else if (strcmp(name, "--format") == 0) {
            if (strcmp(val, "table") == 0) o->format = FMT_TABLE;
            else if (strcmp(val, "csv") == 0) o->format = FMT_CSV;
            else if (strcmp(val, "json") == 0) o->format = FMT_JSON;
            else return fail("--format: expected table, csv or json, got '%s'", val);
        } else if (strcmp(name, "--engine") == 0) {
            if (strcmp(val, "auto") == 0) o->engine = USIM_ENGINE_AUTO;
            else if (strcmp(val, "full") == 0) o->engine = USIM_ENGINE_FULL;
            else if (strcmp(val, "classes") == 0) o->engine = USIM_ENGINE_CLASSES;
            else return fail("--engine: expected auto, full or classes, got '%s'", val);
        } else if (strcmp(name, "--trace") == 0) o->trace = val;
        else if (strcmp(name, "--trace-ranks") == 0) {
            if (mode != OPTS_RUN)
                return fail("--trace-ranks is for single runs (with --trace)");
            if (parse_trace_ranks(o, val))
                return EXIT_BADINPUT;
        }
        else if (strcmp(name, "--out") == 0 && sweep) o->out = val;
        else if (strcmp(name, "--plot") == 0 && sweep) o->plot = val;
        else if (strcmp(name, "--plot-metric") == 0 && sweep) {
            if (strcmp(val, "time") == 0) o->plot_metric = PLOT_TIME;
            else if (strcmp(val, "tflops") == 0) o->plot_metric = PLOT_TFLOPS;
            else if (strcmp(val, "exposed") == 0) o->plot_metric = PLOT_EXPOSED;
            else if (strcmp(val, "memory") == 0) o->plot_metric = PLOT_MEMORY;
            else return fail("--plot-metric: expected time, tflops, exposed or memory, got '%s'", val);
        } else if (strcmp(name, "--seq-per-gpu") == 0 && sweep) {
            if (parse_count(val, &o->seq_per_gpu) || o->seq_per_gpu < 1 || o->seq_per_gpu > ((int64_t)1 << 40))
                return fail("--seq-per-gpu: expected a positive token count (e.g. 4K), got '%s'", val);
        }
        else if (strcmp(name, "--top") == 0 && mode == OPTS_PLAN) {
            if (parse_int_opt(name, val, 1, 1000, &o->top))
                return EXIT_BADINPUT;
        } else if (strcmp(name, "--mem-headroom") == 0 && mode == OPTS_PLAN) {
            /* a percentage of HBM, "10" or "10%" */
            char *end;
            double v = strtod(val, &end);
            if (end == val || (*end && strcmp(end, "%") != 0) || !(v >= 0 && v < 90))
                return fail("--mem-headroom: expected a percentage of HBM in [0, 90) such as 10%%, got '%s'",
                            val);
            o->mem_headroom = v / 100;
        } else if (strcmp(name, "--top") == 0 || strcmp(name, "--mem-headroom") == 0)
            return fail("option '%s' is only valid with 'ulysses-sim plan'", name);
        else return fail("option '%s' is only valid with 'ulysses-sim sweep'", name);
    }
    return 0;
}

int load_inputs(const opts *o, usim_platform *p, usim_model *m)
{
    uly_in ins[2];
    return load_inputs_files(o, p, m, ins);
}

int load_inputs_files(const opts *o, usim_platform *p, usim_model *m, uly_in ins[2])
{
    static char ppath[1024], mpath[1024];
    if (usim_preset_path("platforms", o->platform, ppath, sizeof ppath) || usim_platform_load(ppath, p))
        die_usage("--platform: %s", usim_last_error());
    if (usim_preset_path("models", o->model, mpath, sizeof mpath) || usim_model_load(mpath, m))
        die_usage("--model: %s", usim_last_error());
    for (int w = 0; w < usim_hf_warnings(); w++)   /* a HuggingFace config's keys and costs not modelled */
        fprintf(stderr, "ulysses-sim: warning: --model: %s\n", usim_hf_warning(w));
    ins[0] = (uly_in){ppath, "--platform", NULL};
    ins[1] = (uly_in){mpath, "--model", NULL};
    return 0;
}

int apply_model_overrides(const opts *o, usim_model *m, int64_t seq)
{
    if (o->micro_batch)
        m->micro_batch = o->micro_batch;
    if (o->global_batch)
        m->global_batch = o->global_batch;
    if (m->global_batch < m->micro_batch)
        m->global_batch = m->micro_batch;
    if (o->layers)
        m->layers = o->layers;
    if (seq)
        m->seq = seq;
    if (!m->seq)   /* a HuggingFace config (sim/hfconfig.c) describes the network only */
        die_usage("--model %s: a HuggingFace config has no sequence length: give --seq", o->model);
    return 0;
}

usim_job make_job(const opts *o, uly_method m, int gpus)
{
    usim_job j;
    memset(&j, 0, sizeof j);
    j.method = m;
    j.gpus = gpus;
    j.sp = o->sp;
    j.tp = o->tp;
    j.pp = o->pp;
    j.dp = o->dp;
    j.ulysses = o->ulysses;
    j.zero = o->zero;
    j.recompute = o->recompute;
    j.a2a = o->a2a;
    j.tiled_loss = o->tiled_loss;
    j.tiled_mlp = o->tiled_mlp;
    j.offload = o->offload;
    j.head_chunks = o->head_chunks;
    j.attn_kernel = o->attn_kernel;
    j.attn_dropout = o->attn_dropout;
    j.vpp = o->vpp;
    j.pp_first_layers = o->pp_first_layers;
    j.pp_last_layers = o->pp_last_layers;
    return j;
}
