/* SPDX-License-Identifier: Apache-2.0 */
/*
 * plan.c -- ulysses-sim plan: search every valid composition (method, TP,
 * CP/SP with USP's all-to-all x ring split, PP, DP, ZeRO stage, recompute,
 * micro-batch) for a cluster, model and sequence length; drop what does not
 * fit in HBM; simulate the fitting ones in the order of a closed-form
 * estimate, skipping every one whose compute alone cannot beat the K-th
 * simulated so far (branch and bound), and print the top K by simulated
 * throughput with the reason each loser lost, the rows that tie within the
 * model's uncertainty, and the launch flags of the rows.  `plan --max-seq`:
 * the longest sequence of every composition instead (plan_max_seq).
 *
 * Search space (doc/planning.md section 2): TP within a node and dividing the
 * heads (megatron-sp: any TP); PP dividing the layers; for each structure and
 * each recompute policy only the lowest ZeRO stage that fits is kept (a higher
 * stage only adds communication); micro-batch as given, else every divisor of
 * the global batch per data-parallel rank up to 64 (1 always); a
 * configuration fits when it leaves --mem-headroom of HBM free.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/base_json.h"
#include "base/base_out.h"
#include "base/base_progress.h"
#include "opts.h"
#include "output.h"
#include "plan_launch.h"

int cmd_plan(int argc, char **argv);

/* The largest micro-batch plan searches without --micro-batch. */
enum { PLAN_MB_MAX = 64 };
/* The most virtual stages per pipeline rank plan searches without --vpp (a
 * bound on the search: each V is a candidate of its own; more chunks shrink
 * the bubble as 1/V and add V times the p2p). */
enum { PLAN_VPP_MAX = 8 };

/* Work budgets of the simulations (network work units: flow and link visits
 * of the rate recomputations, see usim_net_set_work_limit; about 5e7 a second
 * on one core at 1024 GPUs, fewer at 16384 where the per-GPU parts grow): each
 * candidate's, and the whole plan's.  A candidate over its budget, or left
 * when the plan's is spent, is not simulated, and the output says how many. */
#define PLAN_SIM_WORK 10000000ULL
#define PLAN_TOTAL_WORK 100000000ULL
/* The wall-clock limit of the plan (seconds from its start) unless --time-limit: it
 * keeps plan within 2 s up to 1024 GPUs and 10 s up to 16384 on one core,
 * whatever the work units cost there (doc/planning.md section 2.1). */
#define PLAN_TIME_SMALL 1.5
#define PLAN_TIME_LARGE 7.0
/* The most GPUs plan searches (the time limit bounds the search at any
 * size; enumeration and the per-GPU parts of one simulation grow with G). */
enum { PLAN_MAX_GPUS = 16384 };
/* Branch and bound: a candidate is not simulated when PLAN_LB_MARGIN times its
 * compute lower bound is at least the K-th best simulated time per sequence.
 * The bound is the closed-form estimate with communication free and the
 * pipeline bubble removed; over the 9,000 candidates of doc/planning.md's
 * ten exhaustive cases the simulated time was at least 1.001 times it, so the
 * 3 % margin is slack below every ratio seen. */
#define PLAN_LB_MARGIN 0.97
/* Ties: rows whose time per token is within this many percent of the best
 * are flagged (--tie): the +-5 % validation.md states for the calibrated
 * iteration-time row (D1), the tightest uncertainty the model claims for an
 * iteration time (doc/planning.md section 2.2). */
#define PLAN_TIE_PCT 5.0

static const char plan_usage[] =
    "usage: ulysses-sim plan --platform P --model M --gpus G --seq S [--global-batch B]\n"
    "                        [--top K] [--method LIST] [--tp N] [--sp N] [--pp N] [--vpp V] [--dp N]\n"
    "                        [--zero S] [--recompute R] [--micro-batch N] [--mem-headroom P%]\n"
    "                        [--tie PCT] [--launch megatron|deepspeed] [--time-limit S]\n"
    "                        [--exhaustive] [--max-seq] [--tiled-loss] [--tiled-mlp [K|auto]]\n"
    "                        [--offload LIST] [--head-chunks K] [--techniques search|none]\n"
    "                        [--attn-kernel flash|unfused] [--attn-dropout]\n"
    "                        [--format table|csv|json] [--quiet|--no-progress]\n"
    "\n"
    "Enumerates every valid (method, tp, cp, pp, V, dp, ZeRO stage, recompute, micro-batch)\n"
    "on G GPUs, drops those that do not fit in memory (leaving --mem-headroom percent of\n"
    "HBM free, default 0), simulates the fitting ones in the order of a closed-form\n"
    "estimate, skipping each whose compute alone (a lower bound) cannot beat the K-th\n"
    "simulated, and prints the top K (default 5) by simulated throughput, with why the\n"
    "others lost (memory, heads limit, sequence divisibility, communication, pipeline\n"
    "bubble) and what was pruned.  Degrees, --zero, --recompute and --micro-batch given\n"
    "on the command line restrict the search; without --micro-batch it tries every\n"
    "micro-batch of up to 64 sequences that divides the global batch per data-parallel\n"
    "rank (1 always).  Methods: all six unless --method is given (Megatron cp_comm_type\n"
    "names accepted).  --top K: at most 1000; G: at most 16384.\n"
    "--vpp V: V virtual pipeline stages per rank (interleaved 1F1B) for every layout\n"
    "(1: 1F1B only); without it each layout with pp > 1 is also tried at every V of 2..8\n"
    "that divides its layers per rank, where the micro-batches per step are a multiple of pp.\n"
    "--tie PCT: rows within PCT percent of #1's time per token are flagged as ties\n"
    "(default 5, the model's stated uncertainty; 0 to 100).\n"
    "--launch megatron|deepspeed: that framework's flags for every row (#1 always gets\n"
    "both); a composition the framework cannot run says why.\n"
    "--time-limit S: S seconds after the start no simulation starts and the running one\n"
    "is stopped (default 1.5 up to 1024 GPUs, 7 above; 0: none); each simulation also\n"
    "has a work budget of 1e7 network work units and the plan one of 1e8 (both x 1024/G\n"
    "above 1024 GPUs).  What was left is printed.\n"
    "--exhaustive: simulate every fitting configuration, no pruning, no budget, no time\n"
    "limit (slow: to check the pruned search).\n"
    "--max-seq: the longest sequence of every composition instead (micro-batch 1 unless\n"
    "--micro-batch), with the resource that binds.\n"
    "Long-context techniques: a composition that does not fit is tried with, in turn,\n"
    "--tiled-loss, + --tiled-mlp auto, + --head-chunks (one query head of the rank at a\n"
    "time; ulysses, usp), + --offload activations (full recompute), + optimizer (ZeRO\n"
    "1+), + params (ZeRO-3), the first that fits kept; --max-seq keeps the one that\n"
    "reaches furthest.  Offload needs a platform with a host.  Any technique option\n"
    "given fixes the set instead of searching it; --techniques none: none of them.\n"
    "A progress line is drawn on stderr when the search takes over a second and stderr\n"
    "is a terminal (--quiet or --no-progress: none).  Exit 2 when no configuration\n"
    "can be simulated (none valid, none fits, every one over its budget).\n";

/* Why a fitting candidate was or was not simulated. */
enum { CS_TODO = 0, CS_SIM, CS_PRUNED, CS_OVER, CS_OVER_LAYOUT, CS_OVER_TOTAL, CS_TIME, CS_FAILED };

typedef struct cand {
    usim_job j;
    int64_t mb;          /* micro-batch */
    double est;          /* the closed-form estimate, seconds per sequence: the search order */
    double lb;           /* compute lower bound, seconds per sequence: the pruning */
    int layout;          /* index of its (method, degrees) layout */
    int first;           /* the lowest lower bound of its method: simulated first */
    int64_t gb;          /* the effective global batch (rounded to whole steps) */
    int ord;             /* enumeration order: stable ties */
    row w;               /* simulated */
    int simulated;
    int state;           /* CS_* */
} cand;

typedef struct census {
    int structures, invalid, oom, fit, simulated;
    int inv_heads, inv_seq, inv_other;
    char inv_example[3][300];
    double oom_best_gib;    /* the smallest memory among configurations that do not fit */
    usim_job oom_best;
    int64_t oom_best_mb;
    int headroom_only;      /* fit in HBM, but not with the requested headroom */
    int pruned, over_sim, over_layout, over_total, timed_out;
    int sim_failed;             /* the simulation refused them (e.g. times not representable) */
    char sim_fail_example[300];
    int mg_cross;               /* megatron-sp layouts whose TP crosses the NVLink domain */
    int mg_tp_max;
} census;

/* Plan-only options, taken out of argv before the shared parser sees it. */
typedef struct plan_opts {
    double tie;             /* percent */
    int launch;             /* 0, LAUNCH_MEGATRON, LAUNCH_DEEPSPEED */
    int exhaustive;
    double time_limit;      /* seconds; <0: the default */
} plan_opts;
enum { LAUNCH_MEGATRON = 1, LAUNCH_DEEPSPEED = 2 };

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int divides(int64_t a, int64_t b) { return a > 0 && b % a == 0; }

static void note_invalid(census *c, const char *msg)
{
    c->invalid++;
    int k = strstr(msg, "heads") ? 0 : strstr(msg, "shorter") || strstr(msg, "2 x CP") ? 1 : 2;
    int *cnt[3] = {&c->inv_heads, &c->inv_seq, &c->inv_other};
    if ((*cnt[k])++ == 0)
        snprintf(c->inv_example[k], sizeof c->inv_example[k], "%s", msg);
}

static double tokens_per_s(const usim_result *r)
{
    return (double)r->global_batch * (double)r->seq / r->iter_s;
}

static double per_seq(const usim_result *r)
{
    return r->iter_s / (double)r->global_batch;
}

static int by_est(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->first != y->first)
        return y->first - x->first;
    if (x->est != y->est)
        return (x->est > y->est) - (x->est < y->est);
    return (x->ord > y->ord) - (x->ord < y->ord);
}

static int by_sim(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->simulated != y->simulated)
        return y->simulated - x->simulated;
    if (!x->simulated)
        return by_est(a, b);
    double tx = tokens_per_s(&x->w.r), ty = tokens_per_s(&y->w.r);
    if (tx != ty)
        return (tx < ty) - (tx > ty);
    return (x->ord > y->ord) - (x->ord < y->ord);
}

/* Why r is slower than best: the largest of the differences in compute,
 * exposed communication by kind and the pipeline bubble (per sequence). */
static void why_slower(const usim_result *r, const usim_result *best, char *out, size_t n)
{
    double sr = 1.0 / (double)r->global_batch, sb = 1.0 / (double)best->global_batch;
    const char *what[5] = {"compute", "exposed SP/CP comm", "exposed parameter gathers",
                           "exposed gradient reduction", "pipeline bubble"};
    double a[5] = {r->compute_s, r->exposed_s[USIM_KIND_SP], r->exposed_s[USIM_KIND_PARAM],
                   r->exposed_s[USIM_KIND_GRAD], r->bubble_s};
    double b[5] = {best->compute_s, best->exposed_s[USIM_KIND_SP], best->exposed_s[USIM_KIND_PARAM],
                   best->exposed_s[USIM_KIND_GRAD], best->bubble_s};
    int k = 0;
    for (int i = 1; i < 5; i++)
        if (a[i] * sr - b[i] * sb > a[k] * sr - b[k] * sb)
            k = i;
    double loss = 100 * (tokens_per_s(best) / tokens_per_s(r) - 1);
    if (loss < 0.05) {
        snprintf(out, n, "ties with #1 (within 0.05%%)");
        return;
    }
    snprintf(out, n, "-%.1f%% tokens/s: %s %.3f vs %.3f s per sequence", loss, what[k], a[k] * sr, b[k] * sb);
}

/* Whether r ties with best: its time per token within tie percent. */
static int is_tie(const usim_result *r, const usim_result *best, double tie)
{
    return tokens_per_s(best) / tokens_per_s(r) <= 1 + tie / 100;
}

/* "tp T cp C pp P dp D", USP's split after cp, "(V n)" after pp when interleaved. */
static void degrees(const usim_job *j, char *buf, size_t n)
{
    int mg = j->method == ULY_METHOD_MEGATRON_SP;
    char v[24] = "";
    if (j->vpp > 1)
        snprintf(v, sizeof v, " (V %d)", j->vpp);
    if (j->method == ULY_METHOD_USP)
        snprintf(buf, n, "tp %d cp %d (%dx%d) pp %d%s dp %d", j->tp, j->sp, j->ulysses, j->sp / j->ulysses,
                 j->pp, v, j->dp);
    else
        snprintf(buf, n, "tp %d cp %d pp %d%s dp %d", mg ? j->sp : j->tp, mg ? 1 : j->sp, j->pp, v, j->dp);
}

/* The TP degree of a resolved job (megatron-sp: its sp). */
static int tp_of(const usim_job *j)
{
    return j->method == ULY_METHOD_MEGATRON_SP ? j->sp : j->tp;
}

/* The resource that binds a composition's memory (usim_memory.bind: none,
 * HBM, host memory, both); for --max-seq the bits of the limit that stops one
 * granule more.  Every output (text, CSV, JSON) prints this. */
static const char *binding_limit(const usim_memory *mem)
{
    return usim_bind_name(mem->bind);
}

/* ------------------------------------------------------------ long-context techniques */

/* The long-context techniques plan tries for a composition, in the order of
 * what they cost in the model (doc/planning.md, "Long-context techniques"):
 * 0 none; 1 tiled loss (no time); 2 + TiledMLP (one extra MLP forward); 3 +
 * head chunks, one query head of the rank at a time (ulysses, usp; unpriced,
 * as UPipe reports); 4 + activation checkpoints offloaded (full recompute
 * only); 5 + the optimizer on the host (CPU Adam); 6 + the parameters too
 * (ZeRO-3).  With a technique option on the command line the user's set is
 * the only level.  Returns 1 with the job in *out, 0 when the level does not
 * apply (or repeats a lower one). */
enum { LC_LEVELS = 7 };
static int plan_lc_none;   /* --techniques none: the compositions as they are */
static int lc_user_set(const opts *o)
{
    return o->tiled_loss || o->tiled_mlp || o->offload || o->head_chunks > 1;
}

static int lc_level(const opts *o, const usim_model *m, const usim_job *j0, int level, usim_job *out)
{
    usim_job j = *j0;
    if (lc_user_set(o)) {
        if (level)
            return 0;
        j.tiled_loss = o->tiled_loss;
        j.tiled_mlp = o->tiled_mlp;
        j.offload = o->offload;
        j.head_chunks = o->head_chunks;
        *out = j;
        return 1;
    }
    if (plan_lc_none && level)
        return 0;
    j.tiled_loss = level >= 1;
    j.tiled_mlp = level >= 2 ? USIM_TILED_MLP_AUTO : 0;
    j.head_chunks = 0;
    j.offload = 0;
    if (level >= 3 && (uly_method_traits(j.method) & ULY_TRAIT_A2A)) {
        /* the rank's query heads: H / TP over the all-to-all degree */
        int T = j.method == ULY_METHOD_MEGATRON_SP ? 1 : (j.tp > 0 ? j.tp : 1);
        int u = j.method == ULY_METHOD_USP ? j.ulysses : j.sp;
        int64_t hl = u > 0 ? m->heads / T / u : 0;
        if (hl >= 2)
            j.head_chunks = (int)hl;
    }
    if (level == 3 && j.head_chunks == 0)
        return 0;
    if (level >= 4 && j.recompute == USIM_RC_FULL)
        j.offload |= USIM_OFFLOAD_ACT;
    if (level == 4 && !j.offload)
        return 0;
    if (level >= 5) {
        if (j.zero < 1)
            return 0;
        j.offload |= USIM_OFFLOAD_OPTIM;
    }
    if (level >= 6) {
        if (j.zero < 3)
            return 0;
        j.offload |= USIM_OFFLOAD_PARAMS;
    }
    *out = j;
    return 1;
}

/* "none" or the techniques of job j, e.g. "tiled-loss tiled-mlp offload:activations+optimizer"
 * (spaces: the value is one CSV field). */
static void lc_name(const usim_job *j, char *buf, size_t n)
{
    size_t k = 0;
    buf[0] = 0;
#define ADD(...) do { if (k < n) k += (size_t)snprintf(buf + k, n - k, __VA_ARGS__); } while (0)
    if (j->tiled_loss)
        ADD("%stiled-loss", k ? " " : "");
    if (j->tiled_mlp == USIM_TILED_MLP_AUTO)
        ADD("%stiled-mlp", k ? " " : "");
    else if (j->tiled_mlp > 0)
        ADD("%stiled-mlp:%d", k ? " " : "", j->tiled_mlp);
    if (j->head_chunks > 1)
        ADD("%shead-chunks:%d", k ? " " : "", j->head_chunks);
    if (j->offload) {
        char off[64];
        out_offload(j->offload, off, sizeof off);   /* the CSV/JSON `offload` value */
        ADD("%soffload:%s", k ? " " : "", off);
    }
#undef ADD
    if (!k)
        snprintf(buf, n, "none");
}

/* Take plan's own options out of argv (argc updated): --tie PCT, --launch F,
 * --time-limit S, --techniques search|none, --exhaustive, each also as
 * --name=value. */
static void plan_own_opts(int *argc, char **argv, plan_opts *po)
{
    po->tie = PLAN_TIE_PCT;
    po->launch = 0;
    po->exhaustive = 0;
    po->time_limit = -1;
    int out = 2;
    for (int i = 2; i < *argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--exhaustive") == 0) {
            po->exhaustive = 1;
            continue;
        }
        const char *names[4] = {"--tie", "--launch", "--time-limit", "--techniques"};
        int k = -1;
        const char *val = NULL;
        for (int q = 0; q < 4; q++) {
            size_t l = strlen(names[q]);
            if (strncmp(a, names[q], l) == 0 && (a[l] == 0 || a[l] == '=')) {
                k = q;
                val = a[l] == '=' ? a + l + 1 : NULL;
            }
        }
        if (k < 0) {
            argv[out++] = argv[i];
            continue;
        }
        if (!val) {
            if (i + 1 >= *argc)
                die_usage("%s needs a value", names[k]);
            val = argv[++i];
        }
        char *end;
        double v;
        switch (k) {
        case 0:
            v = strtod(val, &end);
            if (end == val || (*end && strcmp(end, "%") != 0) || !(v >= 0 && v <= 100))
                die_usage("--tie: expected a percentage in [0, 100] such as 5%%, got '%s'", val);
            po->tie = v;
            break;
        case 1:
            if (strcmp(val, "megatron") == 0)
                po->launch = LAUNCH_MEGATRON;
            else if (strcmp(val, "deepspeed") == 0)
                po->launch = LAUNCH_DEEPSPEED;
            else
                die_usage("--launch: expected megatron or deepspeed, got '%s'", val);
            break;
        case 3:
            if (strcmp(val, "search") == 0)
                plan_lc_none = 0;
            else if (strcmp(val, "none") == 0)
                plan_lc_none = 1;
            else
                die_usage("--techniques: expected search or none, got '%s'", val);
            break;
        default:
            v = strtod(val, &end);
            if (end == val || *end || !(v >= 0 && v <= 86400))
                die_usage("--time-limit: expected seconds in [0, 86400] (0: none), got '%s'", val);
            po->time_limit = v;
            break;
        }
    }
    *argc = out;
    argv[out] = NULL;
}

/* The model with candidate c's micro-batch (the global batch at least one micro-batch). */
static usim_model with_mb(const usim_model *m, int64_t mb)
{
    usim_model mm = *m;
    mm.micro_batch = mb;
    if (mm.global_batch < mm.micro_batch)
        mm.global_batch = mm.micro_batch;
    return mm;
}

/* Enumerate the layouts (method, TP, PP, CP, USP split) of the search, calling
 * fn for each with a base job (zero 3, full recompute: resolved by fn). */
typedef void (*layout_fn)(void *ctx, const usim_job *base, int layout);
static void each_layout(const opts *o, const usim_model *m, const usim_platform *p, int G, const uly_method *methods,
                        int nm, census *cs, layout_fn fn, void *ctx)
{
    int gpn = usim_platform_domain(p);   /* TP stays on NVLink (megatron-sp's TP is its only parallelism) */
    int layout = 0;
    for (int mi = 0; mi < nm; mi++) {
        uly_method me = methods[mi];
        int mg = me == ULY_METHOD_MEGATRON_SP;
        if (!usim_attn_kernel_runs(me, o->attn_kernel))
            continue;   /* reported as not searched under "why the others lost" */
        for (int T = 1; T <= G; T++) {
            if (!divides(T, G) || (!mg && (T > gpn || (o->tp && T != o->tp))) || (mg && o->tp && T != o->tp))
                continue;
            for (int PP = 1; PP <= G / T; PP++) {
                if (!divides(PP, G / T) || !divides(PP, m->layers) || (o->pp && PP != o->pp) ||
                    (!o->pp && PP > 64) || (o->vpp > 1 && PP < 2))   /* --vpp V > 1: pipelines only */
                    continue;
                int rest = G / T / PP;
                for (int C = mg ? 1 : 2; C <= (mg ? 1 : rest); C++) {
                    if (!divides(C, rest) || (!mg && o->sp && C != o->sp) || (mg && o->sp && T != o->sp) ||
                        (o->dp && rest / C != o->dp))
                        continue;
                    for (int u = 0; u <= (me == ULY_METHOD_USP ? C : 0); u++) {
                        if (me == ULY_METHOD_USP && (u < 2 || u >= C || !divides(u, C) ||
                                                     (o->ulysses && u != o->ulysses)))
                            continue;
                        cs->structures++;
                        usim_job base;
                        memset(&base, 0, sizeof base);
                        base.method = me;
                        base.gpus = G;
                        base.tp = T;
                        base.sp = mg ? T : C;
                        base.pp = PP;
                        base.dp = rest / C;
                        base.ulysses = u;
                        base.a2a = o->a2a;
                        base.attn_kernel = o->attn_kernel;
                        base.attn_dropout = o->attn_dropout;
                        base.zero = 3;
                        base.recompute = USIM_RC_FULL;
                        if (mg && T > gpn) {
                            cs->mg_cross++;
                            if (T > cs->mg_tp_max)
                                cs->mg_tp_max = T;
                        }
                        fn(ctx, &base, layout++);
                    }
                }
            }
        }
    }
}

/* ------------------------------------------------------------ the search */

typedef struct search {
    const opts *o;
    const usim_platform *p, *pinf;
    const usim_model *m;
    census *cs;
    cand *cv;
    size_t nc, cap;
    int oom_fail;
} search;

static void add_layout(void *ctx, const usim_job *base, int layout)
{
    search *s = ctx;
    const opts *o = s->o;
    const usim_model *m = s->m;
    const usim_platform *p = s->p;
    census *cs = s->cs;
    usim_job chk = *base;
    if (usim_job_resolve(m, p, &chk)) {
        note_invalid(cs, usim_last_error());
        return;
    }
    /* micro-batches: the given one, else every divisor of the global batch per
     * data-parallel rank up to PLAN_MB_MAX (1 always) */
    int64_t mbs[PLAN_MB_MAX];
    int nmb = 0;
    if (o->micro_batch)
        mbs[nmb++] = o->micro_batch;
    else
        for (int64_t mb = 1; mb <= PLAN_MB_MAX; mb++)
            if (mb == 1 || (m->global_batch % ((int64_t)chk.dp * mb) == 0))
                mbs[nmb++] = mb;
    char lc_err[300] = "", v_err[300] = "";
    size_t nc0 = s->nc;
    /* virtual stages per rank: 1F1B (V 1) and, with pp > 1, every V of
     * 2..PLAN_VPP_MAX that Megatron-Core's constraints accept for the
     * micro-batch (usim_pp_check: V divides each rank's layers, micro-batches
     * a multiple of pp); --vpp V fixes it */
    int vlo = o->vpp ? o->vpp : 1, vhi = o->vpp ? o->vpp : chk.pp > 1 ? PLAN_VPP_MAX : 1;
    for (int mi2 = 0; mi2 < nmb; mi2++)
    for (int V = vlo; V <= vhi; V++) {
        usim_model mm = with_mb(m, mbs[mi2]);
        usim_job vb = *base;
        vb.vpp = V > 1 ? V : 0;
        if (V > 1) {
            usim_job vr = vb;
            if (usim_job_resolve(&mm, p, &vr)) {
                /* a V the layout or micro-batch does not admit: not a candidate
                 * (an error of the layout only when the user fixed it) */
                if (o->vpp && !v_err[0])
                    snprintf(v_err, sizeof v_err, "%s", usim_last_error());
                continue;
            }
        }
        for (int rc = 0; rc <= USIM_RC_FULL; rc++) {
            if (o->recompute_set && rc != (int)o->recompute)
                continue;
            int fitted = 0, plain = 0;
            for (int z = 0; z <= 3 && !plain; z++) {
                if (o->zero_set && z != o->zero)
                    continue;
                usim_job j0 = vb;
                j0.zero = z;
                j0.recompute = (usim_recompute)rc;
                /* the cheapest technique level that fits; a ZeRO stage that fits
                 * without any ends the search (a higher stage only adds traffic) */
                int zfit = 0, zbad = 0;
                for (int lv = 0; lv < LC_LEVELS && !zfit; lv++) {
                    usim_job j;
                    if (!lc_level(o, &mm, &j0, lv, &j))
                        continue;
                    usim_memory mem;
                    int fits;
                    if (usim_memory_estimate(p, &mm, &j, &mem, &fits)) {
                        /* level 0 is the composition itself: invalid; a technique
                         * level that fails does not apply here (e.g. no host) */
                        if (lv == 0 && lc_user_set(o)) {
                            /* the given techniques do not apply to this (recompute, ZeRO):
                             * skipped; the layout is invalid if no pair takes them */
                            if (!lc_err[0])
                                snprintf(lc_err, sizeof lc_err, "%s", usim_last_error());
                            break;
                        }
                        if (lv == 0) {
                            note_invalid(cs, usim_last_error());
                            zbad = 1;
                            break;
                        }
                        continue;
                    }
                    if (fits && mem.total > p->hbm_bytes * (1 - o->mem_headroom)) {
                        fits = 0;
                        cs->headroom_only++;
                    }
                    if (!fits) {
                        if (mem.total / 1073741824.0 < cs->oom_best_gib) {
                            cs->oom_best_gib = mem.total / 1073741824.0;
                            cs->oom_best = j;
                            cs->oom_best_mb = mm.micro_batch;
                        }
                        continue;
                    }
                    fitted = zfit = 1;
                    if (lv == 0 && !lc_user_set(o))
                        plain = 1;
                    double est, inf;
                    if (usim_estimate(p, &mm, &j, &est) || usim_estimate(s->pinf, &mm, &j, &inf)) {
                        note_invalid(cs, usim_last_error());
                        zbad = 1;
                        break;
                    }
                    usim_job r = j;
                    usim_job_resolve(&mm, p, &r);
                    int64_t per = (int64_t)r.dp * mm.micro_batch;
                    int64_t gb = (mm.global_batch + per - 1) / per * per;
                    /* the estimate is stage x the bubble factor (1 + (pp - 1) / (V x
                     * micro-steps)): without the bubble and with communication free,
                     * compute alone */
                    double micro = ceil((double)mm.global_batch / (double)per);
                    double lb = inf / usim_estimate_bubble_factor(&r, micro);
                    if (s->nc == s->cap) {
                        cand *nv = realloc(s->cv, 2 * s->cap * sizeof *s->cv);
                        if (!nv) {
                            s->oom_fail = 1;
                            return;
                        }
                        s->cv = nv;
                        s->cap *= 2;
                    }
                    cand *c = &s->cv[s->nc];
                    memset(c, 0, sizeof *c);
                    c->j = j;
                    c->mb = mm.micro_batch;
                    c->lb = lb / (double)gb;
                    c->est = est / (double)gb;
                    c->gb = gb;
                    c->layout = layout * (PLAN_VPP_MAX + 1) + (V <= PLAN_VPP_MAX ? V : 0);
                    c->ord = (int)s->nc;
                    s->nc++;
                }
                if (zbad)
                    break;
                if (zfit && lc_user_set(o))
                    plain = 1;   /* the user's techniques: the lowest fitting stage, as without */
            }
            if (!fitted && !lc_err[0])
                cs->oom++;
        }
    }
    if (v_err[0] && s->nc == nc0)
        note_invalid(cs, v_err);
    else if (lc_err[0] && s->nc == nc0)
        note_invalid(cs, lc_err);
}

/* A platform whose links are a million times faster: the estimate on it is
 * compute only (communication costs nothing). */
static usim_platform free_comm(const usim_platform *p)
{
    usim_platform q = *p;
    q.nvl_peak_Bps *= 1e6;
    q.nic_peak_Bps *= 1e6;
    q.mesh_link_peak_Bps *= 1e6;
    return q;
}

/* ------------------------------------------------------------ outputs */

static int64_t row_micro_batch(const cand *c) { return c->mb; }

/* The launch of row c: Megatron-LM flags (or why not) and a DeepSpeed config
 * (or why not).  *ds: a new object or NULL. */
static int row_launch(const usim_model *m, const cand *c, char *mflags, size_t nmf, char *mnote, size_t nmn,
                      json_t **ds, char *dnote, size_t ndn)
{
    const usim_result *r = &c->w.r;
    usim_model mm = with_mb(m, c->mb);
    int mrc = plan_megatron_flags(&mm, &r->job, c->mb, r->global_batch, r->job.vpp, mflags, nmf, mnote, nmn);
    *ds = plan_deepspeed_config(&mm, &r->job, c->mb, r->micro_steps, r->global_batch, dnote, ndn);
    return mrc;
}

static void print_launch_text(const usim_model *m, const cand *c, int rank, int which)
{
    char mf[1024], mn[400], dn[1024];
    json_t *ds;
    int mrc = row_launch(m, c, mf, sizeof mf, mn, sizeof mn, &ds, dn, sizeof dn);
    if (which & LAUNCH_MEGATRON) {
        if (mrc)
            printf("launch #%d, Megatron-LM: cannot run it: %s\n", rank, mn);
        else {
            printf("launch #%d, Megatron-LM: %s\n", rank, mf);
            if (mn[0])
                printf("   note: %s\n", mn);
        }
    }
    if (which & LAUNCH_DEEPSPEED) {
        if (!ds)
            printf("launch #%d, DeepSpeed: cannot run it: %s\n", rank, dn[0] ? dn : "out of memory");
        else {
            char *txt = json_dumps(ds, JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII | JSON_COMPACT);
            printf("launch #%d, DeepSpeed: %s\n", rank, txt ? txt : "(out of memory)");
            free(txt);
            if (dn[0])
                printf("   note: %s\n", dn);
        }
    }
    json_decref(ds);
}

/* Add the launch of row c to JSON object o ("launch": {...}); 0 or -1. */
static int json_launch(json_t *o, const usim_model *m, const cand *c)
{
    char mf[1024], mn[400], dn[1024];
    json_t *ds;
    int mrc = row_launch(m, c, mf, sizeof mf, mn, sizeof mn, &ds, dn, sizeof dn);
    json_t *l = uly_json_add_object(o, "launch");
    int bad = !l;
    if (l) {
        bad |= mrc ? json_object_set_new(l, "megatron", json_null()) : uly_json_set_str(l, "megatron", mf);
        bad |= uly_json_set_str(l, "megatron_note", mn);
        bad |= json_object_set_new(l, "deepspeed", ds ? ds : json_null());
        ds = NULL;
        bad |= uly_json_set_str(l, "deepspeed_note", dn);
    }
    json_decref(ds);
    return bad ? -1 : 0;
}

static void csv_field(FILE *f, const char *s)
{
    fputc(',', f);
    uly_fput_quoted(f, s, '"', 0);
}

/* The TP-crosses-nodes note of a row, or "" */
static void tp_note(const usim_platform *p, const usim_job *j, char *buf, size_t n)
{
    int dom = usim_platform_domain(p), T = tp_of(j);
    buf[0] = 0;
    if (T > dom)
        snprintf(buf, n, "TP %d crosses nodes (%d GPUs per NVLink domain): its all-gathers and reduce-scatters "
                 "of every layer run over the NICs", T, dom);
}

/* ------------------------------------------------------------ --max-seq */

typedef struct mcand {
    usim_job j;          /* resolved at the longest sequence */
    int64_t seq;
    usim_memory mem;
    int ord;
} mcand;

typedef struct mx_search {
    const opts *o;
    const usim_platform *p;      /* HBM less the headroom */
    const usim_model *m;
    census *cs;
    mcand *v;
    size_t n, cap;
    int oom_fail, none_fit;
} mx_search;

static void add_layout_maxseq(void *ctx, const usim_job *base, int layout)
{
    (void)layout;
    mx_search *s = ctx;
    usim_model mm = *s->m;
    /* resolve at a sequence every degree divides (2 G is a multiple of 2 x CP x TP) */
    mm.seq = 2 * (int64_t)base->gpus;
    /* 1F1B, or the V of --vpp (activation memory grows with V's warm-up: the
     * longest sequence is searched at the schedule given) */
    usim_job vb = *base;
    vb.vpp = s->o->vpp > 1 ? s->o->vpp : 0;
    usim_job chk = vb;
    if (usim_job_resolve(&mm, s->p, &chk)) {
        note_invalid(s->cs, usim_last_error());
        return;
    }
    char lc_err[300] = "";
    size_t n0 = s->n;
    int nf0 = s->none_fit;
    for (int rc = 0; rc <= USIM_RC_FULL; rc++) {
        if (s->o->recompute_set && rc != (int)s->o->recompute)
            continue;
        for (int z = 0; z <= 3; z++) {
            if (s->o->zero_set && z != s->o->zero)
                continue;
            usim_job j0 = vb;
            j0.zero = z;
            j0.recompute = (usim_recompute)rc;
            /* the technique level that reaches furthest (the lowest on a tie) */
            usim_job j = j0;
            int64_t seq = 0;
            int bind = 0, any = 0;
            for (int lv = 0; lv < LC_LEVELS; lv++) {
                usim_job jl;
                if (!lc_level(s->o, &mm, &j0, lv, &jl))
                    continue;
                int64_t sl;
                int bl;
                if (usim_max_seq_ex(s->p, &mm, &jl, &sl, &bl)) {
                    if (lv == 0 && lc_user_set(s->o)) {   /* as in add_layout */
                        if (!lc_err[0])
                            snprintf(lc_err, sizeof lc_err, "%s", usim_last_error());
                        break;
                    }
                    if (lv == 0) {
                        note_invalid(s->cs, usim_last_error());
                        return;
                    }
                    continue;
                }
                if (!any || sl > seq) {
                    j = jl;
                    seq = sl;
                    bind = bl;
                    any = 1;
                }
            }
            if (!any)
                continue;
            if (seq <= 0) {
                s->none_fit++;
                continue;
            }
            usim_model ms = mm;
            ms.seq = seq;
            usim_memory mem;
            int fits;
            usim_job r = j;
            if (usim_memory_estimate(s->p, &ms, &r, &mem, &fits) || usim_job_resolve(&ms, s->p, &r)) {
                note_invalid(s->cs, usim_last_error());
                return;
            }
            if (s->n == s->cap) {
                mcand *nv = realloc(s->v, 2 * s->cap * sizeof *s->v);
                if (!nv) {
                    s->oom_fail = 1;
                    return;
                }
                s->v = nv;
                s->cap *= 2;
            }
            mcand *c = &s->v[s->n];
            c->j = r;
            c->seq = seq;
            c->mem = mem;
            c->mem.bind = bind;   /* what stops one granule more */
            c->ord = (int)s->n;
            s->n++;
        }
    }
    if (lc_err[0] && s->n == n0 && s->none_fit == nf0)
        note_invalid(s->cs, lc_err);
}

/* Longest first; then the least memory, the lower ZeRO stage and recompute
 * (less communication and compute), the enumeration order. */
static int by_maxseq(const void *a, const void *b)
{
    const mcand *x = a, *y = b;
    if (x->seq != y->seq)
        return (x->seq < y->seq) - (x->seq > y->seq);
    if (x->mem.total != y->mem.total)
        return (x->mem.total > y->mem.total) - (x->mem.total < y->mem.total);
    if (x->j.zero != y->j.zero)
        return x->j.zero - y->j.zero;
    if (x->j.recompute != y->j.recompute)
        return (int)x->j.recompute - (int)y->j.recompute;
    return x->ord - y->ord;
}

static int plan_max_seq(const opts *o, const plan_opts *po, const usim_platform *p0, const usim_model *m, int G,
                        const uly_method *methods, int nm)
{
    usim_platform p = *p0;
    p.hbm_bytes = p0->hbm_bytes * (1 - o->mem_headroom);
    census cs;
    memset(&cs, 0, sizeof cs);
    mx_search s;
    memset(&s, 0, sizeof s);
    s.o = o;
    s.p = &p;
    s.m = m;
    s.cs = &cs;
    s.cap = 1024;
    s.v = malloc(s.cap * sizeof *s.v);
    if (!s.v) {
        fprintf(stderr, "ulysses-sim: out of memory\n");
        return 1;
    }
    each_layout(o, m, &p, G, methods, nm, &cs, add_layout_maxseq, &s);
    if (s.oom_fail) {
        free(s.v);
        fprintf(stderr, "ulysses-sim: out of memory\n");
        return 1;
    }
    if (s.n == 0) {
        free(s.v);
        char mn[OUT_SAFE];
        if (s.none_fit)
            die_usage("plan --max-seq: no composition of %s on %d GPUs fits any sequence in %.4g GiB (its parameter "
                      "state alone is too large); add GPUs", out_safe(m->name, mn), G, p.hbm_bytes / 1073741824.0);
        die_usage("plan --max-seq: no valid composition of %s on %d GPUs (e.g. %s)", out_safe(m->name, mn), G,
                  cs.inv_heads ? cs.inv_example[0] : cs.inv_seq ? cs.inv_example[1] : cs.inv_example[2]);
    }
    qsort(s.v, s.n, sizeof *s.v, by_maxseq);
    int top = o->top < (int)s.n ? o->top : (int)s.n;
    double gib = 1073741824.0;
    char mn[OUT_SAFE], pn[OUT_SAFE];
    if (o->format == FMT_CSV) {
        fputs("rank,method,platform,model,gpus,tp,cp,ulysses_degree,ring_degree,pp,dp,zero,recompute,micro_batch,"
              "max_seq_tokens,mem_GiB,hbm_budget_GiB,limit,techniques,host_GiB_per_node,placement\n", stdout);
        for (int i = 0; i < top; i++) {
            const mcand *c = &s.v[i];
            char pl[256];
            usim_job_placement(&p, &c->j, pl, sizeof pl);
            int mg = c->j.method == ULY_METHOD_MEGATRON_SP;
            printf("%d,%s,", i + 1, uly_method_sim_name(c->j.method));
            uly_fput_quoted(stdout, out_safe(p.name, pn), '"', 0);
            fputc(',', stdout);
            uly_fput_quoted(stdout, out_safe(m->name, mn), '"', 0);
            printf(",%d,%d,%d,%d,%d,%d,%d,%d,%s,%lld,%lld,%.3f,%.3f,%s", G, tp_of(&c->j), mg ? 1 : c->j.sp,
                   c->j.ulysses, c->j.ulysses ? c->j.sp / c->j.ulysses : 0, c->j.pp, c->j.dp, c->j.zero,
                   usim_recompute_name(c->j.recompute), (long long)m->micro_batch, (long long)c->seq,
                   c->mem.total / gib, p.hbm_bytes / gib, binding_limit(&c->mem));
            char tq[160];
            lc_name(&c->j, tq, sizeof tq);
            printf(",%s,%.3f", tq, c->mem.host_node / gib);
            csv_field(stdout, pl);
            fputc('\n', stdout);
        }
    } else if (o->format == FMT_JSON) {
        json_t *root = json_object(), *arr = NULL;
        int bad = !root;
        if (!bad) {
            bad |= uly_json_set_str(root, "platform", p.name);
            bad |= uly_json_set_str(root, "model", m->name);
            bad |= uly_json_set_int(root, "gpus", G);
            bad |= uly_json_set_str(root, "mode", "max_seq");
            bad |= uly_json_set_int(root, "micro_batch", m->micro_batch);
            bad |= uly_json_set_fixed(root, "hbm_budget_GiB", p.hbm_bytes / gib, 3);
            bad |= uly_json_set_int(root, "compositions", (int64_t)s.n);
            bad |= !(arr = uly_json_add_array(root, "results"));
        }
        for (int i = 0; i < top && !bad; i++) {
            const mcand *c = &s.v[i];
            json_t *r = uly_json_append_object(arr);
            if (!r) {
                bad = 1;
                break;
            }
            char pl[256];
            usim_job_placement(&p, &c->j, pl, sizeof pl);
            int mg = c->j.method == ULY_METHOD_MEGATRON_SP;
            bad |= uly_json_set_int(r, "rank", i + 1);
            bad |= uly_json_set_str(r, "method", uly_method_sim_name(c->j.method));
            bad |= uly_json_set_int(r, "tp", tp_of(&c->j));
            bad |= uly_json_set_int(r, "cp", mg ? 1 : c->j.sp);
            bad |= uly_json_set_int(r, "ulysses_degree", c->j.ulysses);
            bad |= uly_json_set_int(r, "pp", c->j.pp);
            bad |= uly_json_set_int(r, "dp", c->j.dp);
            bad |= uly_json_set_int(r, "zero", c->j.zero);
            bad |= uly_json_set_str(r, "recompute", usim_recompute_name(c->j.recompute));
            bad |= uly_json_set_int(r, "max_seq_tokens", c->seq);
            bad |= uly_json_set_fixed(r, "mem_GiB", c->mem.total / gib, 3);
            bad |= uly_json_set_str(r, "limit", binding_limit(&c->mem));
            char tq[160];
            lc_name(&c->j, tq, sizeof tq);
            bad |= uly_json_set_str(r, "techniques", tq);
            bad |= uly_json_set_fixed(r, "host_GiB_per_node", c->mem.host_node / gib, 3);
            bad |= uly_json_set_str(r, "placement", pl);
        }
        if (uly_json_emit(stdout, root, bad, JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII | JSON_REAL_PRECISION(15))) {
            free(s.v);
            fprintf(stderr, "ulysses-sim: cannot write the JSON output (out of memory or write error)\n");
            return 1;
        }
    } else {
        printf("plan --max-seq: %s on %d GPUs of %s, micro-batch %lld, global batch %lld, %.4g GiB per GPU%s\n",
               out_safe(m->name, mn), G, out_safe(p.name, pn), (long long)m->micro_batch,
               (long long)m->global_batch, p.hbm_bytes / gib, o->mem_headroom > 0 ? " (HBM less --mem-headroom)" : "");
        printf("searched %d layouts (method x tp x cp x pp x dp): %d invalid; %zu compositions (x ZeRO stage x "
               "recompute) fit some sequence, %d fit none\n\n", cs.structures, cs.invalid, s.n, s.none_fit);
        printf("%-4s %-12s %-34s %-4s %-10s %16s %8s %-11s %s\n", "rank", "method", "degrees", "zero", "recompute",
               "max seq [tokens]", "mem GiB", "limit", "techniques");
        for (int i = 0; i < top; i++) {
            const mcand *c = &s.v[i];
            char dg[64], tq[160];
            degrees(&c->j, dg, sizeof dg);
            lc_name(&c->j, tq, sizeof tq);
            printf("%-4d %-12s %-34s %-4d %-10s %16lld %8.2f %-11s %s\n", i + 1, uly_method_sim_name(c->j.method),
                   dg, c->j.zero, usim_recompute_name(c->j.recompute), (long long)c->seq, c->mem.total / gib,
                   binding_limit(&c->mem), tq);
        }
        const mcand *b = &s.v[0];
        char dg[64], pl[256];
        degrees(&b->j, dg, sizeof dg);
        usim_job_placement(&p, &b->j, pl, sizeof pl);
        char btq[160];
        lc_name(&b->j, btq, sizeof btq);
        printf("\nlongest sequence: %lld tokens with %s %s, ZeRO-%d, recompute %s (%s); binding limit: %s "
               "(%.2f GiB of %.4g", (long long)b->seq, uly_method_sim_name(b->j.method), dg, b->j.zero,
               usim_recompute_name(b->j.recompute), pl, binding_limit(&b->mem), b->mem.total / gib,
               p.hbm_bytes / gib);
        if (b->mem.host_node > 0)
            printf("; host %.1f GiB per node of %.4g", b->mem.host_node / gib, p.host_bytes / gib);
        printf(")\n  techniques: %s%s\n", btq,
               lc_user_set(o) ? " (as given)" : plan_lc_none ? " (--techniques none)" :
               " (searched: tiled loss, TiledMLP, head chunks, offload)");
        if (s.n > 1)
            printf("  the shortest composition that fits reaches %lld tokens (%s)\n",
                   (long long)s.v[s.n - 1].seq, uly_method_sim_name(s.v[s.n - 1].j.method));
        char tn[200];
        tp_note(&p, &b->j, tn, sizeof tn);
        if (tn[0])
            printf("  note: %s\n", tn);
        if (cs.mg_cross && !o->tp)
            printf("  note: megatron-sp was searched with TP up to %d GPUs; TP beyond %d GPUs crosses nodes\n",
                   cs.mg_tp_max, usim_platform_domain(&p));
        usim_model ms = *m;
        ms.seq = b->seq;
        int bc = b->j.method == ULY_METHOD_MEGATRON_SP ? 1 : b->j.sp;
        if (bc > 1 && ms.seq % (2 * bc)) {
            /* Megatron-LM needs a multiple of 2 x CP: launch the longest one that fits */
            ms.seq = ms.seq / (2 * bc) * (2 * bc);
            printf("  launch at %lld tokens, the longest multiple of 2 x CP = %d (Megatron-LM requires one)\n",
                   (long long)ms.seq, 2 * bc);
        }
        cand c;
        memset(&c, 0, sizeof c);
        c.mb = m->micro_batch;
        c.w.r.job = b->j;
        int64_t per = (int64_t)b->j.dp * m->micro_batch;
        c.w.r.global_batch = (m->global_batch + per - 1) / per * per;
        c.w.r.micro_steps = (int)(c.w.r.global_batch / per);
        print_launch_text(&ms, &c, 1, po->launch ? po->launch : LAUNCH_MEGATRON | LAUNCH_DEEPSPEED);
        if (cs.inv_heads)
            printf("  heads limit: %d, e.g. %s\n", cs.inv_heads, cs.inv_example[0]);
        if (cs.inv_other + cs.inv_seq)
            printf("  other constraints: %d, e.g. %s\n", cs.inv_other + cs.inv_seq,
                   cs.inv_other ? cs.inv_example[2] : cs.inv_example[1]);
    }
    free(s.v);
    if (fflush(stdout)) {
        fprintf(stderr, "ulysses-sim: error writing the output\n");
        return 1;
    }
    return 0;
}


/* ------------------------------------------------------------ the simulations */

typedef struct worker {
    int exhaustive;
    const usim_platform *p;
    const usim_model *m;
    cand *cv;
    size_t nc;
    int K, nlayouts, engine;
    uint64_t sim_work, total_work;
    uly_progress *bar;      /* NULL in a child process */
    double t_start;
} worker;

/* Keep the K best times per sequence, ascending, in b[0..*n). */
static void keep_best(double *b, int *n, int K, double v)
{
    if (*n < K)
        b[(*n)++] = v;
    else if (v < b[K - 1])
        b[K - 1] = v;
    else
        return;
    for (int k = *n - 1; k > 0 && b[k - 1] > b[k]; k--) {
        double t = b[k - 1];
        b[k - 1] = b[k];
        b[k] = t;
    }
}

/* One record of a search process: a candidate's index and state, then its
 * result (CS_SIM) or error text (CS_FAILED); idx -1: done; -2: a fatal error
 * (text follows).  Written with one write() of at most PIPE_BUF bytes, so a
 * record arrives whole. */
typedef struct rec {
    int32_t idx, state;
    usim_result r;
    char err[300];
} rec;

_Static_assert(sizeof(rec) <= PIPE_BUF, "a search record must be written atomically");

static int write_rec(int fd, const rec *r)
{
    const char *b = (const char *)r;
    size_t n = sizeof *r, done = 0;
    while (done < n) {
        ssize_t k = write(fd, b + done, n - done);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        done += (size_t)k;
    }
    return 0;
}

/* Read one record; 0, 1 at end of file, -1 on error. */
static int read_rec(int fd, rec *r)
{
    char *b = (char *)r;
    size_t n = sizeof *r, done = 0;
    while (done < n) {
        ssize_t k = read(fd, b + done, n - done);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return -1;
        if (k == 0)
            return done == 0 ? 1 : -1;
        done += (size_t)k;
    }
    return 0;
}

/* The search loop: candidates in order, branch and bound against the K best
 * simulated so far, the work budgets.  fd >= 0: each decision is written to
 * fd as a record (a child process); fd < 0: applied to cv, with the deadline
 * (seconds from t_start, 0: none) checked before each simulation after the
 * first attempted.  0, or 1
 * with a fatal error in err. */
static int search_loop(worker *w, int fd, double deadline, char *err, size_t nerr)
{
    usim_sim *sim = usim_sim_new(w->p, w->cv[0].j.gpus);
    char *over = calloc((size_t)w->nlayouts + 1, 1);
    double *bestk = malloc((size_t)w->K * sizeof *bestk);
    rec *rb = fd >= 0 ? malloc(sizeof *rb) : NULL;
    if (!sim || !over || !bestk || (fd >= 0 && !rb)) {
        snprintf(err, nerr, "%s", sim ? "out of memory" : usim_last_error());
        usim_sim_free(sim);
        free(over);
        free(bestk);
        free(rb);
        return 1;
    }
    usim_sim_set_engine(sim, w->engine);
    int nbest = 0, nsim = 0, npruned = 0, ntried = 0, bad = 0;
    uint64_t spent = 0;
    for (size_t i = 0; i < w->nc && !bad; i++) {
        cand *c = &w->cv[i];
        int state;
        double sk = nbest == w->K ? bestk[w->K - 1] : INFINITY;
        usim_result res;
        memset(&res, 0, sizeof res);
        char ferr[300] = "";
        if (!w->exhaustive && PLAN_LB_MARGIN * c->lb >= sk)
            state = CS_PRUNED;
        else if (!w->exhaustive && over[c->layout])
            state = CS_OVER_LAYOUT;
        else if (!w->exhaustive && spent >= w->total_work)
            state = CS_OVER_TOTAL;
        else {
            double t = now_s();
            if (fd < 0 && deadline > 0 && t - w->t_start >= deadline && ntried > 0)
                break;   /* the rest stay CS_TODO: left at the time limit */
            ntried++;
            if (w->bar)
                uly_progress_show(w->bar, (double)i, (double)w->nc,
                                  "simulating candidate %zu of %zu (%d simulated, %d pruned)", i + 1, w->nc, nsim,
                                  npruned);
            uint64_t left = w->total_work - spent;
            usim_sim_set_work_limit(sim, w->exhaustive ? 0 : left < w->sim_work ? left : w->sim_work);
            usim_model mm = with_mb(w->m, c->mb);
            int rc = usim_simulate(sim, &mm, &c->j, NULL, &res);
            spent += usim_sim_work(sim);
            if (rc == USIM_OK) {
                state = CS_SIM;
                nsim++;
                keep_best(bestk, &nbest, w->K, per_seq(&res));
            } else if (rc == USIM_ELIMIT) {
                state = left < w->sim_work ? CS_OVER_TOTAL : CS_OVER;
                if (state == CS_OVER)
                    over[c->layout] = 1;
            } else if (rc == USIM_EINVAL) {
                state = CS_FAILED;
                snprintf(ferr, sizeof ferr, "%s", usim_last_error());
            } else {
                snprintf(err, nerr, "%s", usim_last_error());
                bad = 1;
                break;
            }
        }
        npruned += state == CS_PRUNED;
        if (fd >= 0) {
            memset(rb, 0, sizeof *rb);   /* every byte written is defined */
            rb->idx = (int32_t)i;
            rb->state = state;
            rb->r = res;
            snprintf(rb->err, sizeof rb->err, "%s", ferr);
            if (write_rec(fd, rb)) {
                bad = 1;
                snprintf(err, nerr, "the search process could not report");
            }
        } else {
            c->state = state;
            if (state == CS_SIM) {
                c->w.method = c->j.method;
                c->w.ok = 1;
                c->w.r = res;
                c->simulated = 1;
            } else if (state == CS_FAILED)
                snprintf(c->w.err, sizeof c->w.err, "%s", ferr);
        }
    }
    if (fd >= 0) {
        memset(rb, 0, sizeof *rb);
        rb->idx = bad ? -2 : -1;
        snprintf(rb->err, sizeof rb->err, "%s", err);
        write_rec(fd, rb);
    }
    usim_sim_free(sim);
    free(over);
    free(bestk);
    free(rb);
    return bad;
}

/* Run the search within the time limit (seconds from w->t_start; 0: none):
 * in a child process that is stopped when the limit is reached, even in the
 * middle of one long simulation (the work budget bounds a simulation's
 * network part, not its time); without a limit, or if no process can be
 * made, here.  Candidates never reached keep CS_TODO.  0, or 1 with err. */
static int run_search(worker *w, double limit, char *err, size_t nerr)
{
    int pfd[2];
    if (limit <= 0 || pipe(pfd) != 0)
        return search_loop(w, -1, limit, err, nerr);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(pfd[0]);
        close(pfd[1]);
        return search_loop(w, -1, limit, err, nerr);
    }
    if (pid == 0) {
        close(pfd[0]);
        w->bar = NULL;
        int rc = search_loop(w, pfd[1], 0, err, nerr);
        close(pfd[1]);
        _exit(rc ? 1 : 0);
    }
    close(pfd[1]);
    rec *rb = malloc(sizeof *rb);
    int bad = !rb, done = 0, nsim = 0, nrec = 0;
    if (!rb)
        snprintf(err, nerr, "out of memory");
    while (!bad && !done) {
        /* the limit stops the search only once the first candidate (in estimate
         * order) has had its simulation: a slow machine gets a later answer, not
         * none, unless that simulation itself fails */
        double left = limit - (now_s() - w->t_start);
        if (left <= 0 && nrec > 0)
            break;
        if (left <= 0)
            left = 0.25;
        struct pollfd q = {pfd[0], POLLIN, 0};
        int ms = left > 0.25 ? 250 : (int)(left * 1000) + 1;
        int pr = poll(&q, 1, ms);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr < 0) {
            bad = 1;
            snprintf(err, nerr, "waiting for the search: %s", strerror(errno));
            break;
        }
        if (w->bar)
            uly_progress_show(w->bar, (double)nrec, (double)w->nc,
                              "simulating candidate %zu of %zu (%d simulated; time limit %.3g s)",
                              (size_t)nrec < w->nc ? (size_t)nrec + 1 : w->nc, w->nc, nsim, limit);
        if (pr == 0)
            continue;
        int r = read_rec(pfd[0], rb);
        if (r != 0) {
            bad = 1;
            snprintf(err, nerr, "the search process ended without its result");
            break;
        }
        if (rb->idx == -1) {
            done = 1;
            break;
        }
        if (rb->idx < 0 || (size_t)rb->idx >= w->nc) {
            bad = 1;
            snprintf(err, nerr, "%s", rb->idx == -2 ? rb->err : "the search process sent a bad record");
            break;
        }
        cand *c = &w->cv[rb->idx];
        nrec++;
        c->state = rb->state;
        if (rb->state == CS_SIM) {
            c->w.method = c->j.method;
            c->w.ok = 1;
            c->w.r = rb->r;
            c->simulated = 1;
            nsim++;
        } else if (rb->state == CS_FAILED)
            snprintf(c->w.err, sizeof c->w.err, "%s", rb->err);
    }
    if (!done)
        kill(pid, SIGKILL);
    close(pfd[0]);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    free(rb);
    return bad;
}

/* ------------------------------------------------------------ cmd_plan */

int cmd_plan(int argc, char **argv)
{
    double t_start = now_s();
    plan_opts po;
    plan_own_opts(&argc, argv, &po);
    opts o;
    opts_defaults(&o);
    o.top = 5;
    int help;
    if (opts_parse(&o, argc, argv, 2, OPTS_PLAN, &help))
        die_usage("%s", opts_error());
    if (help) {
        fputs(plan_usage, stdout);
        return 0;
    }
    if (o.trace)
        die_usage("plan: --trace is for single runs");
    if (o.pp_first_layers || o.pp_last_layers)
        die_usage("plan: --pp-first-layers and --pp-last-layers are for single runs (plan searches even "
                  "pipeline stages)");
    if (plan_lc_none && lc_user_set(&o))
        die_usage("plan: --techniques none contradicts the technique options given (--tiled-loss, "
                  "--tiled-mlp, --offload, --head-chunks)");
    usim_platform p;
    usim_model m;
    load_inputs(&o, &p, &m);
    int G = o.ngpus ? (int)o.gpus[0] : 64;
    if (G > PLAN_MAX_GPUS)
        die_usage("plan: --gpus %d is more than the %d GPUs plan searches in bounded time (simulate one "
                  "configuration with ulysses-sim --gpus %d, or plan on fewer GPUs)", G, PLAN_MAX_GPUS, G);
    if (usim_platform_check_gpus(&p, G))
        die_usage("%s", usim_last_error());
    apply_model_overrides(&o, &m, o.nseqs ? o.seqs[0] : 0);
    if (o.max_seq && !o.micro_batch)
        m.micro_batch = 1;
    uly_method methods[ULY_METHOD_ALL];
    int nm = 0;
    if (o.methods_explicit)
        for (int i = 0; i < o.nmethods; i++)
            methods[nm++] = o.methods[i];
    else
        for (int i = 0; i < ULY_METHOD_ALL; i++)
            methods[nm++] = usim_method_order[i];
    if (o.max_seq) {
        if (po.exhaustive || po.time_limit >= 0)
            die_usage("plan --max-seq: --exhaustive and --time-limit are for the throughput search (--max-seq "
                      "always searches every composition)");
        return plan_max_seq(&o, &po, &p, &m, G, methods, nm);
    }

    census cs;
    memset(&cs, 0, sizeof cs);
    cs.oom_best_gib = INFINITY;
    usim_platform pinf = free_comm(&p);
    search s;
    memset(&s, 0, sizeof s);
    s.o = &o;
    s.p = &p;
    s.pinf = &pinf;
    s.m = &m;
    s.cs = &cs;
    s.cap = 1024;
    s.cv = malloc(s.cap * sizeof *s.cv);
    if (!s.cv) {
        fprintf(stderr, "ulysses-sim: out of memory\n");
        return 1;
    }
    each_layout(&o, &m, &p, G, methods, nm, &cs, add_layout, &s);
    cand *cv = s.cv;
    size_t nc = s.nc;
    if (s.oom_fail) {
        free(cv);
        fprintf(stderr, "ulysses-sim: out of memory\n");
        return 1;
    }
    cs.fit = (int)nc;
    if (nc == 0) {
        free(cv);
        if (cs.oom)
            die_usage("plan: no configuration of %d GPUs fits in %.4g GiB%s (the smallest needs %.1f GiB); "
                      "add GPUs or shorten --seq", G, p.hbm_bytes * (1 - o.mem_headroom) / 1073741824.0,
                      o.mem_headroom > 0 ? " (HBM less --mem-headroom)" : "", cs.oom_best_gib);
        char mn[OUT_SAFE];
        die_usage("plan: no valid configuration of %s on %d GPUs (e.g. %s)", out_safe(m.name, mn), G,
                  cs.inv_heads ? cs.inv_example[0] : cs.inv_seq ? cs.inv_example[1] : cs.inv_example[2]);
    }
    /* the search order: the best estimate of each method first (so that every
     * method's best is known early and explains its loss), then by estimate */
    qsort(cv, nc, sizeof *cv, by_est);
    {
        int firsts[ULY_METHOD_ALL] = {0};
        for (size_t i = 0; i < nc; i++)
            if (!firsts[cv[i].j.method]) {
                firsts[cv[i].j.method] = 1;
                cv[i].first = 1;
            }
        qsort(cv, nc, sizeof *cv, by_est);
    }
    double limit = po.exhaustive ? 0 : po.time_limit >= 0 ? po.time_limit
                 : G <= 1024 ? PLAN_TIME_SMALL : PLAN_TIME_LARGE;
    int K = o.top;
    worker wk;
    memset(&wk, 0, sizeof wk);
    wk.exhaustive = po.exhaustive;
    wk.p = &p;
    wk.m = &m;
    wk.cv = cv;
    wk.nc = nc;
    wk.K = K;
    wk.nlayouts = cs.structures * (PLAN_VPP_MAX + 1);   /* a layout's budget is per V (add_layout) */
    wk.engine = o.engine;
    /* above 1024 GPUs a work unit costs more time (the per-GPU parts of a
     * simulation grow with G): the budgets shrink as 1024 / G */
    wk.sim_work = G <= 1024 ? PLAN_SIM_WORK : PLAN_SIM_WORK / (uint64_t)G * 1024;
    wk.total_work = G <= 1024 ? PLAN_TOTAL_WORK : PLAN_TOTAL_WORK / (uint64_t)G * 1024;
    uly_progress bar;
    char what[64];
    snprintf(what, sizeof what, "ulysses-sim plan (%d GPUs)", G);
    uly_progress_begin(&bar, !o.no_progress, what);
    wk.bar = &bar;
    wk.t_start = t_start;
    double t_sim0 = now_s();
    char fatal[300] = "";
    int frc = run_search(&wk, limit, fatal, sizeof fatal);
    double t_sim = now_s() - t_sim0;
    uly_progress_clear(&bar);
    if (frc) {
        free(cv);
        fprintf(stderr, "ulysses-sim: %s\n", fatal);
        return 1;
    }
    /* the census of the search, from each candidate's state */
    double *bestk = malloc((size_t)K * sizeof *bestk);
    if (!bestk) {
        free(cv);
        fprintf(stderr, "ulysses-sim: out of memory\n");
        return 1;
    }
    int nbest = 0;
    for (size_t i = 0; i < nc; i++)
        if (cv[i].state == CS_SIM)
            keep_best(bestk, &nbest, K, per_seq(&cv[i].w.r));
    double sk_final = nbest == K ? bestk[K - 1] : INFINITY;
    for (size_t i = 0; i < nc; i++) {
        cand *c = &cv[i];
        switch (c->state) {
        case CS_SIM: cs.simulated++; break;
        case CS_PRUNED: cs.pruned++; break;
        case CS_OVER: cs.over_sim++; break;
        case CS_OVER_LAYOUT: cs.over_layout++; break;
        case CS_OVER_TOTAL: cs.over_total++; break;
        case CS_FAILED:
            cs.sim_failed++;
            if (!cs.sim_fail_example[0])
                snprintf(cs.sim_fail_example, sizeof cs.sim_fail_example, "%s", c->w.err);
            break;
        default:
            /* not reached before the time limit: pruned all the same when its bound
             * cannot beat the K-th found (which is no better than the true K-th) */
            if (PLAN_LB_MARGIN * c->lb >= sk_final) {
                c->state = CS_PRUNED;
                cs.pruned++;
            } else {
                c->state = CS_TIME;
                cs.timed_out++;
            }
            break;
        }
    }
    free(bestk);
    if (cs.simulated == 0) {
        /* nothing to rank: say why, never an empty table */
        free(cv);
        if (cs.sim_failed)
            die_usage("plan: %d configurations of %d GPUs fit, but none can be simulated (e.g. %s)", cs.fit, G,
                      cs.sim_fail_example);
        if (cs.timed_out && !cs.over_sim && !cs.over_total)
            die_usage("plan: %d configurations of %d GPUs fit, but the time limit (%.3g s) was reached before "
                      "one was simulated; raise --time-limit or restrict the search", cs.fit, G, limit);
        die_usage("plan: %d configurations of %d GPUs fit, but every one tried is over the simulation work "
                  "budget (%d over their own, %d of the same layout, %d left when the plan's was spent); restrict "
                  "the search (--method, --tp, --sp, --pp) or plan for fewer GPUs", cs.fit, G, cs.over_sim,
                  cs.over_layout, cs.over_total);
    }
    /* the best estimate of each method, before sorting by simulation */
    int seen[ULY_METHOD_ALL] = {0};
    for (size_t i = 0; i < nc; i++)
        seen[cv[i].j.method] = 1;
    qsort(cv, nc, sizeof *cv, by_sim);
    int top = o.top < cs.simulated ? o.top : cs.simulated;
    const usim_result *best = &cv[0].w.r;
    int ties = 0;
    for (int i = 1; i < top; i++)
        ties += is_tie(&cv[i].w.r, best, po.tie);
    /* not simulated although their lower bound is below the K-th: they could rank higher */
    int could = 0;
    for (size_t i = 0; i < nc; i++)
        if (!cv[i].simulated && cv[i].state != CS_PRUNED && PLAN_LB_MARGIN * cv[i].lb < sk_final)
            could++;
    if (o.format == FMT_CSV || o.format == FMT_JSON) {
        usim_model mm0 = m;
        if (o.format == FMT_CSV) {
            char *hb = NULL;
            size_t hl = 0;
            FILE *hf = open_memstream(&hb, &hl);
            if (!hf) {
                free(cv);
                fprintf(stderr, "ulysses-sim: out of memory\n");
                return 1;
            }
            out_csv_header(hf);
            fclose(hf);
            if (hl && hb[hl - 1] == '\n')
                hb[--hl] = 0;
            printf("%s,rank,micro_batch,tie,megatron_flags,megatron_note,deepspeed_config,deepspeed_note,"
                   "tp_note,lower_bound_s\n", hb);
            free(hb);
            for (int i = 0; i < top; i++) {
                usim_model mm = with_mb(&mm0, cv[i].mb);
                char *rb = NULL;
                size_t rl = 0;
                FILE *rf = open_memstream(&rb, &rl);
                if (!rf) {
                    free(cv);
                    fprintf(stderr, "ulysses-sim: out of memory\n");
                    return 1;
                }
                out_csv_row(rf, &p, &mm, G, &cv[i].w);
                fclose(rf);
                if (rl && rb[rl - 1] == '\n')
                    rb[--rl] = 0;
                fputs(rb, stdout);
                free(rb);
                char mf[1024], mn[400], dn[1024], tn[200];
                json_t *ds;
                int mrc = row_launch(&m, &cv[i], mf, sizeof mf, mn, sizeof mn, &ds, dn, sizeof dn);
                char *dtxt = ds ? json_dumps(ds, JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII | JSON_COMPACT) : NULL;
                printf(",%d,%lld,%s", i + 1, (long long)row_micro_batch(&cv[i]),
                       i == 0 ? "best" : is_tie(&cv[i].w.r, best, po.tie) ? "tie" : "no");
                csv_field(stdout, mrc ? "" : mf);
                csv_field(stdout, mn);
                csv_field(stdout, dtxt ? dtxt : "");
                csv_field(stdout, dn);
                tp_note(&p, &cv[i].w.r.job, tn, sizeof tn);
                csv_field(stdout, tn);
                printf(",%.6g\n", cv[i].lb);
                free(dtxt);
                json_decref(ds);
            }
        } else {
            row *rows = calloc((size_t)top, sizeof *rows);
            char *jb = NULL;
            size_t jl = 0;
            FILE *jf = rows ? open_memstream(&jb, &jl) : NULL;
            int bad = !jf;
            if (jf) {
                for (int i = 0; i < top; i++)
                    rows[i] = cv[i].w;
                bad |= out_json(jf, &p, &m, G, rows, top) != 0;
                bad |= fclose(jf) != 0;
            }
            free(rows);
            json_t *root = bad ? NULL : json_loads(jb, 0, NULL);
            free(jb);
            bad |= !root;
            json_t *res = root ? json_object_get(root, "results") : NULL;
            for (int i = 0; i < top && res && !bad; i++) {
                json_t *o1 = json_array_get(res, (size_t)i);
                if (!o1) {
                    bad = 1;
                    break;
                }
                char tn[200];
                bad |= uly_json_set_int(o1, "rank", i + 1);
                bad |= uly_json_set_bool(o1, "tie", i > 0 && is_tie(&cv[i].w.r, best, po.tie));
                tp_note(&p, &cv[i].w.r.job, tn, sizeof tn);
                bad |= uly_json_set_str(o1, "tp_note", tn);
                bad |= uly_json_set_real(o1, "lower_bound_s", cv[i].lb);
                bad |= json_launch(o1, &m, &cv[i]);
            }
            json_t *pl = root ? uly_json_add_object(root, "plan") : NULL;
            bad |= !pl;
            if (pl) {
                bad |= uly_json_set_fixed(pl, "tie_pct", po.tie, 3);
                bad |= uly_json_set_int(pl, "ties", ties);
                bad |= uly_json_set_int(pl, "layouts", cs.structures);
                bad |= uly_json_set_int(pl, "fitting", cs.fit);
                bad |= uly_json_set_int(pl, "simulated", cs.simulated);
                bad |= uly_json_set_int(pl, "pruned_lower_bound", cs.pruned);
                bad |= uly_json_set_int(pl, "over_own_budget", cs.over_sim);
                bad |= uly_json_set_int(pl, "over_budget_same_layout", cs.over_layout);
                bad |= uly_json_set_int(pl, "over_plan_budget", cs.over_total);
                bad |= uly_json_set_int(pl, "time_limit_left", cs.timed_out);
                bad |= uly_json_set_int(pl, "could_rank_higher", could);
                bad |= uly_json_set_bool(pl, "exhaustive", po.exhaustive);
                bad |= uly_json_set_fixed(pl, "time_limit_s", limit, 3);
            }
            if (uly_json_emit(stdout, root, bad, JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII | JSON_REAL_PRECISION(15))) {
                fprintf(stderr, "ulysses-sim: cannot write the JSON output (out of memory or write error)\n");
                free(cv);
                return 1;
            }
        }
    } else {
        char mbs[64];
        if (o.micro_batch)
            snprintf(mbs, sizeof mbs, "micro-batch %lld", (long long)m.micro_batch);
        else
            snprintf(mbs, sizeof mbs, "micro-batch searched (divisors up to %d)", PLAN_MB_MAX);
        double budget = p.hbm_bytes * (1 - o.mem_headroom) / 1073741824.0;
        char mn[OUT_SAFE], pn[OUT_SAFE];
        printf("plan: %s on %d GPUs of %s, %lld tokens per sequence, global batch %lld, %s\n",
               out_safe(m.name, mn), G, out_safe(p.name, pn), (long long)m.seq, (long long)m.global_batch, mbs);
        if (o.mem_headroom > 0)
            printf("memory budget: %.1f GiB of %.0f (--mem-headroom %g%%)\n", budget,
                   p.hbm_bytes / 1073741824.0, 100 * o.mem_headroom);
        printf("searched %d layouts (method x tp x cp x pp x dp): %d invalid; of the valid ones x micro-batch x "
               "recompute policies, %d fit in %.4g GiB at no ZeRO stage, %d fit (each at its lowest fitting ZeRO "
               "stage); %d simulated\n",
               cs.structures, cs.invalid, cs.oom, budget, cs.fit, cs.simulated);
        printf("search: %d simulated in %.2f s; %d pruned (their compute alone cannot beat #%d); ties: within "
               "%g%% of #1's time per token (--tie)\n\n", cs.simulated, t_sim, cs.pruned, K, po.tie);
        printf("%-4s %-12s %-34s %-3s %-4s %-10s %9s %10s %9s %6s %8s %8s %4s\n", "rank", "method", "degrees",
               "mb", "zero", "recompute", "iter [s]", "Mtok/s", "TFLOP/s", "MFU %", "mem GiB", "exp. [s]", "tie");
        for (int i = 0; i < top; i++) {
            const usim_result *r = &cv[i].w.r;
            char dg[64];
            degrees(&r->job, dg, sizeof dg);
            double ex = r->exposed_s[0] + r->exposed_s[1] + r->exposed_s[2];
            printf("%-4d %-12s %-34s %-3lld %-4d %-10s %9.3f %10.4f %9.1f %6.1f %8.1f %8.3f %4s\n", i + 1,
                   uly_method_sim_name(r->job.method), dg, (long long)cv[i].mb, r->job.zero,
                   usim_recompute_name(r->job.recompute), r->iter_s, tokens_per_s(r) / 1e6, r->tflops,
                   100 * r->mfu, r->mem.total / 1073741824.0, ex,
                   i == 0 ? "best" : is_tie(r, best, po.tie) ? "tie" : "no");
        }
        printf("\n");
        for (int i = 0; i < top; i++) {
            const usim_result *r = &cv[i].w.r;
            char pl[256], why[200], tn[200];
            usim_job_placement(&p, &r->job, pl, sizeof pl);
            printf("#%d %s: %s", i + 1, uly_method_sim_name(r->job.method), pl);
            char tq[160];
            lc_name(&r->job, tq, sizeof tq);
            if (r->job.tiled_loss || r->job.tiled_mlp || r->job.offload || r->job.head_chunks > 1)
                printf("; techniques: %s", tq);
            if (i > 0) {
                why_slower(r, best, why, sizeof why);
                printf("; %s", why);
                if (is_tie(r, best, po.tie))
                    printf("; tie: within the %g%% uncertainty", po.tie);
            }
            printf("\n");
            tp_note(&p, &r->job, tn, sizeof tn);
            if (tn[0])
                printf("   note: %s\n", tn);
            for (int k = 0; k < r->nwarn; k++)
                printf("   warning: %s\n", r->warn[k]);
        }
        if (ties)
            printf("ties: %d of the rows after #1 are within %g%% of its time per token: the model cannot rank them (--tie)\n", ties, po.tie);
        printf("\n");
        for (int i = 0; i < top; i++)
            print_launch_text(&m, &cv[i], i + 1,
                              i == 0 ? LAUNCH_MEGATRON | LAUNCH_DEEPSPEED | po.launch : po.launch);
        printf("\nwhy the others lost:\n");
        for (int mi = 0; mi < nm; mi++) {
            if (!seen[methods[mi]])
                continue;
            int k;
            for (k = 0; k < (int)nc; k++)
                if (cv[k].simulated && cv[k].j.method == methods[mi])
                    break;
            if (k < top)
                continue;
            if (k == (int)nc) {
                /* no configuration of this method was simulated: the best lower bound says why */
                double lbm = INFINITY;
                int st = CS_PRUNED;
                for (size_t q = 0; q < nc; q++)
                    if (cv[q].j.method == methods[mi] && cv[q].lb < lbm) {
                        lbm = cv[q].lb;
                        st = cv[q].state;
                    }
                if (st == CS_PRUNED)
                    printf("  best %s (not simulated): its fastest compute alone, %.3f s per sequence, is no faster "
                           "than #%d's %.3f\n", uly_method_sim_name(methods[mi]), lbm, K, sk_final);
                else
                    printf("  best %s (not simulated): %s\n", uly_method_sim_name(methods[mi]),
                           st == CS_TIME ? "time limit reached" : st == CS_FAILED ? "refused by the simulation"
                                                                                   : "over the work budget");
                continue;
            }
            char dg[64], why[200];
            degrees(&cv[k].w.r.job, dg, sizeof dg);
            why_slower(&cv[k].w.r, best, why, sizeof why);
            char tn[200];
            tp_note(&p, &cv[k].w.r.job, tn, sizeof tn);
            printf("  best %s (rank %d, %s, micro-batch %lld, ZeRO-%d, recompute %s): %s%s%.*s\n",
                   uly_method_sim_name(methods[mi]), k + 1, dg, (long long)cv[k].mb, cv[k].w.r.job.zero,
                   usim_recompute_name(cv[k].w.r.job.recompute), why, tn[0] ? "; " : "",
                   tn[0] ? (int)(strchr(tn, ')') ? strchr(tn, ')') - tn + 1 : (long)strlen(tn)) : 0, tn);
        }
        for (int mi = 0; mi < nm; mi++)
            if (!seen[methods[mi]]) {
                if (!usim_attn_kernel_runs(methods[mi], o.attn_kernel))
                    printf("  %s: not searched: --attn-kernel unfused runs with ulysses and megatron-sp only\n",
                           uly_method_sim_name(methods[mi]));
                else
                    printf("  %s: no valid configuration fits\n", uly_method_sim_name(methods[mi]));
            }
        if (cs.oom) {
            char dg[64];
            degrees(&cs.oom_best, dg, sizeof dg);
            printf("  memory: %d do not fit at any ZeRO stage; the closest, %s %s micro-batch %lld recompute %s, "
                   "needs %.2f GiB of %.4g\n", cs.oom, uly_method_sim_name(cs.oom_best.method), dg,
                   (long long)cs.oom_best_mb, usim_recompute_name(cs.oom_best.recompute), cs.oom_best_gib, budget);
        }
        if (cs.headroom_only)
            printf("  memory headroom: %d (configuration, ZeRO stage) pairs fit in %.0f GiB but not in the "
                   "%.1f GiB budget\n", cs.headroom_only, p.hbm_bytes / 1073741824.0, budget);
        if (cs.inv_heads)
            printf("  heads limit: %d, e.g. %s\n", cs.inv_heads, cs.inv_example[0]);
        if (cs.inv_seq)
            printf("  sequence length vs the degree (too short, or not a multiple of 2 x CP for zigzag): %d, "
                   "e.g. %s\n", cs.inv_seq, cs.inv_example[1]);
        if (cs.inv_other)
            printf("  other constraints: %d, e.g. %s\n", cs.inv_other, cs.inv_example[2]);
        if (cs.pruned)
            printf("  pruned: %d fitting configurations whose compute alone (the estimate with free communication "
                   "and no bubble, less %.0f%%) is no faster than #%d's simulated %.3f s per sequence: none of them "
                   "can rank in the top %d\n", cs.pruned, 100 * (1 - PLAN_LB_MARGIN), K, sk_final, K);
        if (cs.over_sim)
            printf("  not simulated: %d over the work budget of one simulation (%.0e network work units)\n",
                   cs.over_sim, (double)wk.sim_work);
        if (cs.over_layout)
            printf("  not simulated: %d of a layout whose simulation ran over its budget (the same collectives)\n",
                   cs.over_layout);
        if (cs.over_total)
            printf("  not simulated: %d left when the plan's work budget (%.0e units) was spent\n",
                   cs.over_total, (double)wk.total_work);
        if (cs.timed_out)
            printf("  not simulated: %d left when the time limit (%.3g s from the start) was reached "
                   "(--time-limit 0: no limit)\n", cs.timed_out, limit);
        if (could)
            printf("  could rank higher: %d of those not simulated have a compute lower bound below #%d's time "
                   "(--exhaustive or --time-limit 0 to settle it)\n", could, K);
        if (cs.sim_failed)
            printf("  not simulated: %d refused by the simulation, e.g. %s\n", cs.sim_failed, cs.sim_fail_example);
        if (cs.mg_cross)
            printf("  note: megatron-sp has no context parallelism, so it was searched with TP over up to %d GPUs; "
                   "%d of its layouts put TP across nodes (beyond %d GPUs), where every layer's all-gathers and "
                   "reduce-scatters cross the NICs\n", cs.mg_tp_max, cs.mg_cross, usim_platform_domain(&p));
    }
    free(cv);
    if (fflush(stdout)) {
        fprintf(stderr, "ulysses-sim: error writing the output\n");
        return 1;
    }
    return 0;
}
