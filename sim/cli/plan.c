/* SPDX-License-Identifier: Apache-2.0 */
/*
 * plan.c -- ulysses-sim plan: search every valid composition (method, TP,
 * CP/SP with USP's all-to-all x ring split, PP, DP, ZeRO stage, recompute)
 * for a cluster, model and sequence length; drop what does not fit in HBM;
 * rank the rest by a closed-form estimate, simulate the best, and print the
 * top K by simulated throughput with the reason each loser lost.
 *
 * Search space and pruning (doc/simulator.md, "plan"): TP within a node and
 * dividing the heads; PP dividing the layers; for each structure and each
 * recompute policy only the lowest ZeRO stage that fits is kept (a higher
 * stage only adds communication); micro-batch as given, else searched over
 * every divisor of the global batch per data-parallel rank up to 64 (1
 * always); a configuration fits when it leaves --mem-headroom of HBM free.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base_progress.h"
#include "opts.h"
#include "output.h"

int cmd_plan(int argc, char **argv);

/* The largest micro-batch plan searches without --micro-batch. */
enum { PLAN_MB_MAX = 64 };

/* Work budgets of the simulations (network work units: flow and link visits
 * of the rate recomputations, see usim_net_set_work_limit; about 5e7 a second
 * on one core): each candidate's, and the whole plan's.  A candidate over its
 * budget, or left when the plan's is spent, is not simulated, and the table
 * says how many; the search stays bounded at any accepted GPU count. */
#define PLAN_SIM_WORK 50000000ULL
#define PLAN_TOTAL_WORK 500000000ULL
/* The most GPUs plan searches: the work budgets bound the network part of
 * each simulation, not the per-GPU parts (layouts, class analysis), which at
 * a million GPUs take hours over a search's candidates; 16384 plans in about
 * 17 s (doc/simulator.md, "plan"). */
enum { PLAN_MAX_GPUS = 16384 };

static const char plan_usage[] =
    "usage: ulysses-sim plan --platform P --model M --gpus G --seq S [--global-batch B]\n"
    "                        [--top K] [--method LIST] [--tp N] [--sp N] [--pp N] [--dp N]\n"
    "                        [--zero S] [--recompute R] [--micro-batch N] [--mem-headroom P%]\n"
    "                        [--format table|csv|json] [--quiet|--no-progress]\n"
    "\n"
    "Enumerates every valid (method, tp, cp, pp, dp, ZeRO stage, recompute, micro-batch)\n"
    "on G GPUs, drops those that do not fit in memory (leaving --mem-headroom percent of\n"
    "HBM free, default 0), ranks the rest by a closed-form estimate, simulates the best\n"
    "and prints the top K (default 5) by simulated throughput, with why the others lost\n"
    "(memory, heads limit, sequence divisibility, communication, pipeline bubble).\n"
    "Degrees, --zero, --recompute and --micro-batch given on the command line restrict\n"
    "the search; without --micro-batch it tries every micro-batch of up to 64 sequences\n"
    "that divides the global batch per data-parallel rank (1 always).\n"
    "Methods: all six unless --method is given (Megatron cp_comm_type names accepted).\n"
    "--top K: at most 1000; G: at most 16384 (one configuration: ulysses-sim, up to 1048576).\n"
    "The search is bounded: each simulation has a work budget of 5e7 network work units\n"
    "(about a second) and the plan one of 5e8; a candidate over its budget, or left when the plan's is\n"
    "spent, is not simulated, and the table says how many.  A progress line (candidates\n"
    "simulated, time left) is drawn on stderr when it is a terminal (--quiet or\n"
    "--no-progress: none).  Exit 2 when no configuration\n"
    "can be simulated (none valid, none fits, every one over its budget).\n";

typedef struct cand {
    usim_job j;
    int64_t mb;          /* micro-batch */
    double est;          /* estimated seconds per sequence */
    row w;               /* simulated */
    int simulated;
    int want;            /* chosen for simulation */
} cand;

typedef struct census {
    int structures, invalid, oom, fit, simulated;
    int inv_heads, inv_seq, inv_other;
    char inv_example[3][300];
    double oom_best_gib;    /* the smallest memory among configurations that do not fit */
    usim_job oom_best;
    int64_t oom_best_mb;
    int headroom_only;      /* fit in HBM, but not with the requested headroom */
    int over_sim, over_total;   /* not simulated: over their own work budget, the plan's spent */
    int sim_failed;             /* the simulation refused them (e.g. times not representable) */
    char sim_fail_example[300];
} census;

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

static int by_est(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    return (x->est > y->est) - (x->est < y->est);
}

static int by_sim(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->simulated != y->simulated)
        return y->simulated - x->simulated;
    if (!x->simulated)
        return by_est(a, b);
    double tx = tokens_per_s(&x->w.r), ty = tokens_per_s(&y->w.r);
    return (tx < ty) - (tx > ty);
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

static void degrees(const usim_job *j, char *buf, size_t n)
{
    int mg = j->method == ULY_METHOD_MEGATRON_SP;
    if (j->method == ULY_METHOD_USP)
        snprintf(buf, n, "tp %d cp %d (%dx%d) pp %d dp %d", j->tp, j->sp, j->ulysses, j->sp / j->ulysses,
                 j->pp, j->dp);
    else
        snprintf(buf, n, "tp %d cp %d pp %d dp %d", mg ? j->sp : j->tp, mg ? 1 : j->sp, j->pp, j->dp);
}

int cmd_plan(int argc, char **argv)
{
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
    if (o.trace || o.max_seq)
        die_usage("plan: --trace and --max-seq are for single runs");
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
    uly_method methods[ULY_METHOD_ALL];
    int nm = 0;
    if (o.methods_explicit)
        for (int i = 0; i < o.nmethods; i++)
            methods[nm++] = o.methods[i];
    else
        for (int i = 0; i < ULY_METHOD_ALL; i++)
            methods[nm++] = usim_method_order[i];

    census cs;
    memset(&cs, 0, sizeof cs);
    cs.oom_best_gib = INFINITY;
    size_t cap = 1024, nc = 0;
    cand *cv = malloc(cap * sizeof *cv);
    if (!cv) {
        fprintf(stderr, "ulysses-sim: out of memory\n");
        return 1;
    }
    int gpn = usim_platform_domain(&p);   /* TP stays on NVLink */
    for (int mi = 0; mi < nm; mi++) {
        uly_method me = methods[mi];
        int mg = me == ULY_METHOD_MEGATRON_SP;
        for (int T = 1; T <= G; T++) {
            if (!divides(T, G) || (!mg && (T > gpn || (o.tp && T != o.tp))) || (mg && o.tp && T != o.tp))
                continue;
            for (int PP = 1; PP <= G / T; PP++) {
                if (!divides(PP, G / T) || !divides(PP, m.layers) || (o.pp && PP != o.pp) ||
                    (!o.pp && PP > 64))
                    continue;
                int rest = G / T / PP;
                for (int C = mg ? 1 : 2; C <= (mg ? 1 : rest); C++) {
                    if (!divides(C, rest) || (!mg && o.sp && C != o.sp) || (mg && o.sp && T != o.sp) ||
                        (o.dp && rest / C != o.dp))
                        continue;
                    for (int u = 0; u <= (me == ULY_METHOD_USP ? C : 0); u++) {
                        if (me == ULY_METHOD_USP && (u < 2 || u >= C || !divides(u, C) ||
                                               (o.ulysses && u != o.ulysses)))
                            continue;
                        cs.structures++;
                        usim_job base;
                        memset(&base, 0, sizeof base);
                        base.method = me;
                        base.gpus = G;
                        base.tp = T;
                        base.sp = mg ? T : C;
                        base.pp = PP;
                        base.dp = rest / C;
                        base.ulysses = u;
                        base.a2a = o.a2a;
                        base.zero = 3;
                        base.recompute = USIM_RC_FULL;
                        usim_job chk = base;
                        if (usim_job_resolve(&m, &p, &chk)) {
                            note_invalid(&cs, usim_last_error());
                            continue;
                        }
                        /* micro-batches: the given one, else every divisor of the
                         * global batch per data-parallel rank up to PLAN_MB_MAX (1 always) */
                        int64_t mbs[PLAN_MB_MAX];
                        int nmb = 0;
                        if (o.micro_batch)
                            mbs[nmb++] = o.micro_batch;
                        else
                            for (int64_t mb = 1; mb <= PLAN_MB_MAX; mb++)
                                if (mb == 1 || (m.global_batch % ((int64_t)chk.dp * mb) == 0))
                                    mbs[nmb++] = mb;
                        for (int mi2 = 0; mi2 < nmb; mi2++) {
                            usim_model mm = m;
                            mm.micro_batch = mbs[mi2];
                            if (mm.global_batch < mm.micro_batch)
                                mm.global_batch = mm.micro_batch;
                            for (int rc = 0; rc <= USIM_RC_FULL; rc++) {
                                if (o.recompute_set && rc != (int)o.recompute)
                                    continue;
                                int fitted = 0;
                                for (int z = 0; z <= 3 && !fitted; z++) {
                                    if (o.zero_set && z != o.zero)
                                        continue;
                                    usim_job j = base;
                                    j.zero = z;
                                    j.recompute = (usim_recompute)rc;
                                    usim_memory mem;
                                    int fits;
                                    if (usim_memory_estimate(&p, &mm, &j, &mem, &fits)) {
                                        note_invalid(&cs, usim_last_error());
                                        break;
                                    }
                                    if (fits && mem.total > p.hbm_bytes * (1 - o.mem_headroom)) {
                                        fits = 0;
                                        cs.headroom_only++;
                                    }
                                    if (!fits) {
                                        if (mem.total / 1073741824.0 < cs.oom_best_gib) {
                                            cs.oom_best_gib = mem.total / 1073741824.0;
                                            cs.oom_best = j;
                                            cs.oom_best_mb = mm.micro_batch;
                                        }
                                        continue;
                                    }
                                    fitted = 1;
                                    double est;
                                    if (usim_estimate(&p, &mm, &j, &est)) {
                                        note_invalid(&cs, usim_last_error());
                                        break;
                                    }
                                    usim_job r = j;
                                    usim_job_resolve(&mm, &p, &r);
                                    int64_t per = (int64_t)r.dp * mm.micro_batch;
                                    int64_t gb = (mm.global_batch + per - 1) / per * per;
                                    if (nc == cap) {
                                        cand *nv = realloc(cv, 2 * cap * sizeof *cv);
                                        if (!nv) {
                                            free(cv);
                                            fprintf(stderr, "ulysses-sim: out of memory\n");
                                            return 1;
                                        }
                                        cv = nv;
                                        cap *= 2;
                                    }
                                    memset(&cv[nc], 0, sizeof cv[nc]);
                                    cv[nc].j = j;
                                    cv[nc].mb = mm.micro_batch;
                                    cv[nc].est = est / (double)gb;
                                    nc++;
                                }
                                if (!fitted)
                                    cs.oom++;
                            }
                        }
                    }
                }
            }
        }
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
    qsort(cv, nc, sizeof *cv, by_est);
    size_t nsim = (size_t)(4 * o.top > 24 ? 4 * o.top : 24);
    /* also the best estimate of every method, so each method's best is simulated */
    usim_sim *sim = usim_sim_new(&p, G);
    if (!sim) {
        free(cv);
        fprintf(stderr, "ulysses-sim: %s\n", usim_last_error());
        return 1;
    }
    usim_sim_set_engine(sim, o.engine);
    int seen[ULY_METHOD_ALL] = {0};
    /* the candidates to simulate: the best nsim estimates and each method's best */
    size_t todo = 0, ndone = 0;
    for (size_t i = 0; i < nc; i++) {
        int first = !seen[cv[i].j.method];
        seen[cv[i].j.method] = 1;
        cv[i].want = i < nsim || first;
        todo += (size_t)cv[i].want;
    }
    uly_progress bar;
    char what[64];
    snprintf(what, sizeof what, "ulysses-sim plan (%d GPUs)", G);
    uly_progress_begin(&bar, !o.no_progress, what);
    uint64_t spent = 0;
    for (size_t i = 0; i < nc; i++) {
        if (!cv[i].want)
            continue;
        uly_progress_show(&bar, (double)ndone, (double)todo, "simulating candidate %zu of %zu", ndone + 1, todo);
        ndone++;
        if (spent >= PLAN_TOTAL_WORK) {
            cs.over_total++;
            continue;
        }
        uint64_t left = PLAN_TOTAL_WORK - spent;
        usim_sim_set_work_limit(sim, left < PLAN_SIM_WORK ? left : PLAN_SIM_WORK);
        cv[i].w.method = cv[i].j.method;
        usim_model mm = m;
        mm.micro_batch = cv[i].mb;
        if (mm.global_batch < mm.micro_batch)
            mm.global_batch = mm.micro_batch;
        int rc = usim_simulate(sim, &mm, &cv[i].j, NULL, &cv[i].w.r);
        spent += usim_sim_work(sim);
        if (rc == USIM_OK) {
            cv[i].w.ok = 1;
            cv[i].simulated = 1;
            cs.simulated++;
        } else if (rc == USIM_ELIMIT) {
            if (left < PLAN_SIM_WORK)
                cs.over_total++;
            else
                cs.over_sim++;
        } else if (rc == USIM_EINVAL) {
            cs.sim_failed++;
            if (!cs.sim_fail_example[0])
                snprintf(cs.sim_fail_example, sizeof cs.sim_fail_example, "%s", usim_last_error());
        } else {
            uly_progress_clear(&bar);
            usim_sim_free(sim);
            free(cv);
            fprintf(stderr, "ulysses-sim: %s\n", usim_last_error());
            return 1;
        }
    }
    uly_progress_clear(&bar);
    usim_sim_free(sim);
    if (cs.simulated == 0) {
        /* nothing to rank: say why, never an empty table */
        free(cv);
        if (cs.sim_failed)
            die_usage("plan: %d configurations of %d GPUs fit, but none can be simulated (e.g. %s)", cs.fit, G,
                      cs.sim_fail_example);
        die_usage("plan: %d configurations of %d GPUs fit, but every one tried is over the simulation work "
                  "budget (%d over their own, %d left when the plan's was spent); restrict the search "
                  "(--method, --tp, --sp, --pp) or plan for fewer GPUs", cs.fit, G, cs.over_sim, cs.over_total);
    }
    qsort(cv, nc, sizeof *cv, by_sim);
    int top = o.top < cs.simulated ? o.top : cs.simulated;
    const usim_result *best = &cv[0].w.r;

    if (o.format == FMT_CSV || o.format == FMT_JSON) {
        row *rows = calloc((size_t)top, sizeof *rows);
        if (!rows) {
            free(cv);
            fprintf(stderr, "ulysses-sim: out of memory\n");
            return 1;
        }
        for (int i = 0; i < top; i++)
            rows[i] = cv[i].w;
        if (o.format == FMT_CSV) {
            out_csv_header(stdout);
            for (int i = 0; i < top; i++) {
                usim_model mm = m;
                mm.micro_batch = cv[i].mb;
                out_csv_row(stdout, &p, &mm, G, &rows[i]);
            }
        } else {
            if (out_json(stdout, &p, &m, G, rows, top)) {
                fprintf(stderr, "ulysses-sim: cannot write the JSON output (out of memory or write error)\n");
                free(rows);
                free(cv);
                return 1;
            }
        }
        free(rows);
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
               "stage); %d simulated\n\n",
               cs.structures, cs.invalid, cs.oom, budget, cs.fit, cs.simulated);
        printf("%-4s %-12s %-30s %-3s %-4s %-10s %9s %10s %9s %6s %8s %8s\n", "rank", "method", "degrees",
               "mb", "zero", "recompute", "iter [s]", "Mtok/s", "TFLOP/s", "MFU %", "mem GiB", "exp. [s]");
        for (int i = 0; i < top; i++) {
            const usim_result *r = &cv[i].w.r;
            char dg[64];
            degrees(&r->job, dg, sizeof dg);
            double ex = r->exposed_s[0] + r->exposed_s[1] + r->exposed_s[2];
            printf("%-4d %-12s %-30s %-3lld %-4d %-10s %9.3f %10.4f %9.1f %6.1f %8.1f %8.3f\n", i + 1,
                   uly_method_sim_name(r->job.method), dg, (long long)cv[i].mb, r->job.zero,
                   usim_recompute_name(r->job.recompute), r->iter_s, tokens_per_s(r) / 1e6, r->tflops,
                   100 * r->mfu, r->mem.total / 1073741824.0, ex);
        }
        printf("\n");
        for (int i = 0; i < top; i++) {
            const usim_result *r = &cv[i].w.r;
            char pl[256], why[200];
            usim_job_placement(&p, &r->job, pl, sizeof pl);
            printf("#%d %s: %s", i + 1, uly_method_sim_name(r->job.method), pl);
            if (i > 0) {
                why_slower(r, best, why, sizeof why);
                printf("; %s", why);
            }
            printf("\n");
            for (int k = 0; k < r->nwarn; k++)
                printf("   warning: %s\n", r->warn[k]);
        }
        printf("\nwhy the others lost:\n");
        for (int mi = 0; mi < nm; mi++) {
            int k;
            for (k = 0; k < (int)nc; k++)
                if (cv[k].simulated && cv[k].j.method == methods[mi])
                    break;
            if (k == (int)nc || k < top)
                continue;
            char dg[64], why[200];
            degrees(&cv[k].w.r.job, dg, sizeof dg);
            why_slower(&cv[k].w.r, best, why, sizeof why);
            printf("  best %s (rank %d, %s, micro-batch %lld, ZeRO-%d, recompute %s): %s\n",
                   uly_method_sim_name(methods[mi]), k + 1, dg, (long long)cv[k].mb, cv[k].w.r.job.zero,
                   usim_recompute_name(cv[k].w.r.job.recompute), why);
        }
        for (int mi = 0; mi < nm; mi++)
            if (!seen[methods[mi]])
                printf("  %s: no valid configuration fits\n", uly_method_sim_name(methods[mi]));
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
        int skipped = cs.over_sim + cs.over_total + cs.sim_failed;
        if ((int)nc > cs.simulated + skipped)
            printf("  not simulated: %d fitting configurations whose estimate ranks below the %d simulated\n",
                   (int)nc - cs.simulated - skipped, cs.simulated);
        if (cs.over_sim)
            printf("  not simulated: %d over the work budget of one simulation (%.0e network work units)\n",
                   cs.over_sim, (double)PLAN_SIM_WORK);
        if (cs.over_total)
            printf("  not simulated: %d left when the plan's work budget (%.0e units) was spent\n",
                   cs.over_total, (double)PLAN_TOTAL_WORK);
        if (cs.sim_failed)
            printf("  not simulated: %d refused by the simulation, e.g. %s\n", cs.sim_failed, cs.sim_fail_example);
    }
    free(cv);
    if (fflush(stdout)) {
        fprintf(stderr, "ulysses-sim: error writing the output\n");
        return 1;
    }
    return 0;
}
