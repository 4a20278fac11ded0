/* SPDX-License-Identifier: Apache-2.0 */
/*
 * attn.c -- `ulysses-sim attn`: predict one distributed attention forward +
 * backward, phase by phase, as `ulysses attn` runs and times it (the same
 * options for the shape), on a platform file -- typically one written by
 * `ulysses calibrate` (doc/validation.md).
 */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base_json.h"
#include "jsonutil.h"
#include "opts.h"
#include "output.h"

int cmd_attn(int argc, char **argv);

static const char attn_usage[] =
    "usage: ulysses-sim attn --platform PRESET|FILE [--gpus P] [--batch B] [--seq N] [--heads H]\n"
    "                        [--kv-heads Hkv] [--head-dim d] [--causal] [--dtype fp32|bf16|fp16]\n"
    "                        [--a2a direct|pairwise] [--rank R] [--format table|json]\n"
    "       ulysses-sim attn --platform PRESET|FILE --compare RUN.json [--label TEXT]\n"
    "                        [--format table|json|markdown]\n"
    "\n"
    "Predicts the phases `ulysses attn --backward` times on P ranks (P = --gpus, default 1):\n"
    "all-to-all in (q, k, v), attention, all-to-all out (o), and the same for the backward\n"
    "(do in; dq, dk, dv out), plus the bytes rank R (default 0) sends and receives in each\n"
    "all-to-all.  Shape defaults are those of `ulysses attn`: B=1 N=1024 H=8 Hkv=H d=64, fp32.\n"
    "Maxima: P 4096, N 2^40 (1024G), B, H, Hkv 2^20, d 65536, R < P; a shape whose tensors\n"
    "reach 2^60 bytes or whose time exceeds 4e6 s (int64 picoseconds) is refused (exit 2).\n"
    "\n"
    "--compare RUN.json reads the output of `ulysses attn --backward --json` (its job: ranks,\n"
    "shape, mask, dtype) and prints, per phase and for forward, backward and iteration, the\n"
    "measured time, the prediction and the error; exit 1 if the bytes rank 0 moved differ from\n"
    "the simulator's.  --format markdown prints table rows (first column --label) for\n"
    "doc/validation.md.\n";

static const char *const phase_names[USIM_NPHASE] = {
    "fwd a2a in (q,k,v)", "fwd attention", "fwd a2a out (o)",
    "bwd a2a in (do)", "bwd attention", "bwd a2a out (dq,dk,dv)"};
static const char *const a2a_names[8] = {"q", "k", "v", "o", "do", "dq", "dk", "dv"};

static int64_t count_arg(const char *name, const char *v, int64_t max)
{
    int64_t x;
    if (!v)
        die_usage("attn: %s needs a value", name);
    if (parse_count(v, &x) || x < 1 || x > max)
        die_usage("attn: %s '%s': expected an integer in 1..%lld", name, v, (long long)max);
    return x;
}

/* ------------------------------------------------------------ --compare */

typedef struct measured {
    double phase_ms[USIM_NPHASE];
    double fwd_ms, bwd_ms, iter_ms;
    int critical;                 /* phases are critical-path medians (else medians over ranks x reps) */
    uint64_t sent[8], recv[8];    /* rank 0, per call */
} measured;

static int64_t jint(json_t *o, const char *k, int *bad)
{
    json_t *v = json_object_get(o, k);
    if (!json_is_integer(v)) {
        *bad = 1;
        return 0;
    }
    return (int64_t)json_integer_value(v);
}

static double jnum(json_t *o, const char *k, int *bad)
{
    json_t *v = json_object_get(o, k);
    if (!json_is_number(v)) {
        *bad = 1;
        return 0;
    }
    return json_number_value(v);
}

/* The job and the measured times of a `ulysses attn --backward --json` run. */
static void load_run(const char *path, usim_attn_job *j, measured *m)
{
    usim_jdoc d;
    memset(m, 0, sizeof *m);
    if (usim_json_load(&d, path)) {
        usim_json_free(&d);
        die_usage("attn: --compare: %s", usim_last_error());
    }
    json_t *r = d.root;
    int bad = 0;
    j->gpus = (int)jint(r, "ranks", &bad);
    j->batch = jint(r, "batch", &bad);
    j->seq = jint(r, "seq", &bad);
    j->heads = jint(r, "heads", &bad);
    j->kv_heads = jint(r, "kv_heads", &bad);
    j->head_dim = jint(r, "head_dim", &bad);
    json_t *mask = json_object_get(r, "mask"), *dt = json_object_get(r, "dtype"), *bw = json_object_get(r, "backward");
    if (bad || !json_is_string(mask) || !json_is_string(dt))
        die_usage("attn: --compare %s: not the output of `ulysses attn --json` (ranks, shape, mask, dtype)", path);
    if (!json_is_true(bw))
        die_usage("attn: --compare %s: the run has no backward (run ulysses attn with --backward)", path);
    const char *ms = json_string_value(mask), *ds = json_string_value(dt);
    char safe[OUT_SAFE];
    if (!strcmp(ms, "none"))
        j->causal = 0;
    else if (!strcmp(ms, "causal"))
        j->causal = 1;
    else
        die_usage("attn: --compare %s: mask '%s' is not modelled (none or causal)", path, out_safe(ms, safe));
    if (strcmp(ds, "f32") != 0)
        die_usage("attn: --compare %s: dtype '%s' is not modelled (f32)", path, out_safe(ds, safe));
    j->dtype = USIM_FP32;
    for (int i = 0; i < USIM_NPHASE; i++) {
        char key[32];
        snprintf(key, sizeof key, "phase_%d_ms", i);
        json_t *ph = json_object_get(r, key);
        json_t *crit = json_object_get(ph, "critical");
        m->critical = json_is_number(crit);
        m->phase_ms[i] = m->critical ? json_number_value(crit) : jnum(ph, "median", &bad);
    }
    json_t *f = json_object_get(r, "forward_ms"), *it = json_object_get(r, "iteration_ms");
    if (json_is_number(f) && json_is_number(it)) {
        m->fwd_ms = json_number_value(f);
        m->iter_ms = json_number_value(it);
    } else {
        /* from the throughput: slowest rank's forward, forward + backward per repetition (medians) */
        double S = (double)j->seq, pairs = j->causal ? S * (S + 1) / 2 : S * S;
        double ffl = 4.0 * pairs * (double)j->head_dim * (double)(j->batch * j->heads);
        m->fwd_ms = ffl / (jnum(r, "fwd_gflops", &bad) * 1e9) * 1e3;
        m->iter_ms = 3.5 * ffl / (jnum(r, "fwdbwd_gflops", &bad) * 1e9) * 1e3;
    }
    m->bwd_ms = m->iter_ms - m->fwd_ms;
    json_t *by = json_object_get(r, "bytes_rank0");
    for (int w = 0; w < 8; w++) {
        json_t *o = json_object_get(by, a2a_names[w]);
        m->sent[w] = (uint64_t)jint(o, "sent", &bad);
        m->recv[w] = (uint64_t)jint(o, "recv", &bad);
    }
    if (bad)
        die_usage("attn: --compare %s: missing or non-numeric phase times or bytes", path);
    usim_json_free(&d);
}

static double err_pct(double pred, double meas)
{
    return meas > 0 ? 100.0 * (pred - meas) / meas : NAN;
}

static int compare(const usim_platform *p, const usim_attn_job *j, const usim_attn_result *r, const measured *m,
                   int format, const char *label)
{
    const char *rows[USIM_NPHASE + 3];
    double meas[USIM_NPHASE + 3], pred[USIM_NPHASE + 3];
    char pn[OUT_SAFE];
    for (int i = 0; i < USIM_NPHASE; i++) {
        rows[i] = phase_names[i];
        meas[i] = m->phase_ms[i];
        pred[i] = 1e3 * r->phase_s[i];
    }
    rows[6] = "forward"; meas[6] = m->fwd_ms; pred[6] = 1e3 * r->fwd_s;
    rows[7] = "backward"; meas[7] = m->bwd_ms; pred[7] = 1e3 * r->bwd_s;
    rows[8] = "iteration"; meas[8] = m->iter_ms; pred[8] = 1e3 * r->iter_s;
    int bytes_ok = 1;
    for (int w = 0; w < 8; w++)
        bytes_ok &= m->sent[w] == r->sent[w] && m->recv[w] == r->recv[w];
    if (format == 2) {   /* markdown rows */
        for (int i = 0; i < USIM_NPHASE + 3; i++)
            printf("| %s | %s | %.2f | %.2f | %+.1f %% |\n", label ? label : "", rows[i], meas[i], pred[i],
                   err_pct(pred[i], meas[i]));
    } else if (format == 1) {
        json_t *o = json_object(), *arr = NULL;
        int bad = !o;
        if (!bad) {
            bad |= uly_json_set_str(o, "label", label ? label : "");
            bad |= uly_json_set_str(o, "platform", p->name);
            bad |= uly_json_set_int(o, "ranks", j->gpus);
            bad |= uly_json_set_bool(o, "critical_path", m->critical);
            bad |= !(arr = uly_json_add_array(o, "rows"));
        }
        for (int i = 0; i < USIM_NPHASE + 3 && !bad; i++) {
            json_t *x = uly_json_append_object(arr);
            bad |= !x;
            if (x) {
                bad |= uly_json_set_str(x, "name", rows[i]);
                bad |= uly_json_set_fixed(x, "measured_ms", meas[i], 6);
                bad |= uly_json_set_fixed(x, "predicted_ms", pred[i], 6);
                bad |= uly_json_set_fixed(x, "error_pct", err_pct(pred[i], meas[i]), 3);
            }
        }
        if (!bad)
            bad |= uly_json_set_bool(o, "bytes_equal", bytes_ok);
        if (uly_json_emit(stdout, o, bad, JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII | JSON_REAL_PRECISION(15))) {
            fprintf(stderr, "ulysses-sim: attn: cannot write the JSON output (out of memory or write error)\n");
            return 1;
        }
    } else {
        printf("ulysses attn on %d rank%s of %s (%d per node): B=%lld N=%lld H=%lld Hkv=%lld d=%lld mask=%s\n",
               j->gpus, j->gpus > 1 ? "s" : "", out_safe(p->name, pn), p->gpus_per_node, (long long)j->batch, (long long)j->seq,
               (long long)j->heads, (long long)j->kv_heads, (long long)j->head_dim, j->causal ? "causal" : "none");
        printf("measured: %s\n\n", m->critical ? "medians over repetitions of the critical path (slowest rank's "
               "compute, last-arriving rank's all-to-all)" : "medians over ranks x repetitions");
        printf("%-26s %12s %12s %9s\n", "phase", "measured ms", "predicted ms", "error");
        for (int i = 0; i < USIM_NPHASE + 3; i++)
            printf("%-26s %12.3f %12.3f %+8.1f%%\n", rows[i], meas[i], pred[i], err_pct(pred[i], meas[i]));
        printf("\nbytes of rank 0 in the 8 all-to-alls: run %s simulator\n", bytes_ok ? "==" : "!=");
    }
    if (!bytes_ok) {
        for (int w = 0; w < 8; w++)
            if (m->sent[w] != r->sent[w] || m->recv[w] != r->recv[w])
                fprintf(stderr, "ulysses-sim: attn: all-to-all %s: run sent %llu received %llu, simulator %llu / %llu\n",
                        a2a_names[w], (unsigned long long)m->sent[w], (unsigned long long)m->recv[w],
                        (unsigned long long)r->sent[w], (unsigned long long)r->recv[w]);
        return 1;
    }
    return 0;
}

int cmd_attn(int argc, char **argv)
{
    const char *platform = NULL;
    char pn[OUT_SAFE];
    usim_attn_job j;
    memset(&j, 0, sizeof j);
    j.batch = 1; j.seq = 1024; j.heads = 8; j.kv_heads = 0; j.head_dim = 64; j.dtype = USIM_FP32;
    j.gpus = 1; j.a2a = USIM_A2A_DIRECT;
    int64_t rank = 0;
    int json = 0, shape_given = 0;
    const char *compare_path = NULL, *label = NULL;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(attn_usage, stdout);
            return 0;
        } else if (!strcmp(a, "--causal")) {
            j.causal = 1;
            shape_given = 1;
            continue;
        } else if (!strcmp(a, "--compare")) {
            if (!v)
                die_usage("attn: --compare needs a file");
            compare_path = v;
        } else if (!strcmp(a, "--label")) {
            if (!v)
                die_usage("attn: --label needs a value");
            label = v;
        } else if (!strcmp(a, "--platform")) {
            if (!v)
                die_usage("attn: --platform needs a value");
            platform = v;
        } else if (!strcmp(a, "--gpus")) {
            shape_given = 1;
            j.gpus = (int)count_arg(a, v, 4096);
        } else if (!strcmp(a, "--batch")) {
            shape_given = 1;
            j.batch = count_arg(a, v, 1 << 20);
        } else if (!strcmp(a, "--seq")) {
            shape_given = 1;
            j.seq = count_arg(a, v, (int64_t)1 << 40);
        } else if (!strcmp(a, "--heads")) {
            shape_given = 1;
            j.heads = count_arg(a, v, 1 << 20);
        } else if (!strcmp(a, "--kv-heads")) {
            shape_given = 1;
            j.kv_heads = count_arg(a, v, 1 << 20);
        } else if (!strcmp(a, "--head-dim")) {
            shape_given = 1;
            j.head_dim = count_arg(a, v, 1 << 16);
        } else if (!strcmp(a, "--rank")) {
            if (!v || parse_count(v, &rank) || rank < 0 || rank > (1 << 20))
                die_usage("attn: --rank '%s': expected an integer >= 0", v ? v : "");
        } else if (!strcmp(a, "--dtype")) {
            if (v && !strcmp(v, "fp32")) j.dtype = USIM_FP32;
            else if (v && !strcmp(v, "bf16")) j.dtype = USIM_BF16;
            else if (v && !strcmp(v, "fp16")) j.dtype = USIM_FP16;
            else die_usage("attn: --dtype '%s': expected fp32, bf16 or fp16", v ? v : "");
        } else if (!strcmp(a, "--a2a")) {
            if (v && !strcmp(v, "direct")) j.a2a = USIM_A2A_DIRECT;
            else if (v && !strcmp(v, "pairwise")) j.a2a = USIM_A2A_PAIRWISE;
            else die_usage("attn: --a2a '%s': expected direct or pairwise", v ? v : "");
        } else if (!strcmp(a, "--format")) {
            if (v && !strcmp(v, "table")) json = 0;
            else if (v && !strcmp(v, "json")) json = 1;
            else if (v && !strcmp(v, "markdown")) json = 2;
            else die_usage("attn: --format '%s': expected table, json or markdown", v ? v : "");
        } else {
            die_usage("attn: unknown option '%s' (see ulysses-sim attn --help)", a);
        }
        i++;
    }
    if (!platform)
        die_usage("attn: --platform is required (a preset or a file written by ulysses calibrate)");
    measured meas;
    if (compare_path) {
        if (shape_given)
            die_usage("attn: --compare takes the job from the run; do not give --gpus or shape options too");
        load_run(compare_path, &j, &meas);
    } else if (json == 2) {
        die_usage("attn: --format markdown needs --compare");
    }
    if (!j.kv_heads)
        j.kv_heads = j.heads;
    if (rank >= j.gpus)
        die_usage("attn: --rank %lld is not one of the %d ranks", (long long)rank, j.gpus);
    char path[1024];
    usim_platform p;
    if (usim_preset_path("platforms", platform, path, sizeof path) || usim_platform_load(path, &p))
        die_usage("--platform: %s", usim_last_error());
    usim_attn_result r;
    int rc = usim_attn_simulate(&p, &j, (int)rank, &r);
    if (rc == USIM_EINVAL)
        die_usage("attn: %s", usim_last_error());
    if (rc) {
        fprintf(stderr, "ulysses-sim: attn: %s\n", usim_last_error());
        return 1;
    }
    if (compare_path)
        return compare(&p, &j, &r, &meas, json, label);
    const char *mask = j.causal ? "causal" : "none";
    if (json) {
        json_t *o = json_object(), *by = NULL;
        int bad = !o;
        if (!bad) {
            bad |= uly_json_set_str(o, "platform", p.name);
            bad |= uly_json_set_int(o, "gpus", j.gpus);
            bad |= uly_json_set_int(o, "gpus_per_node", p.gpus_per_node);
            bad |= uly_json_set_int(o, "batch", j.batch);
            bad |= uly_json_set_int(o, "seq", j.seq);
            bad |= uly_json_set_int(o, "heads", j.heads);
            bad |= uly_json_set_int(o, "kv_heads", j.kv_heads);
            bad |= uly_json_set_int(o, "head_dim", j.head_dim);
            bad |= uly_json_set_str(o, "mask", mask);
            bad |= uly_json_set_str(o, "dtype", usim_dtype_name(j.dtype));
            bad |= uly_json_set_str(o, "a2a", j.a2a == USIM_A2A_PAIRWISE ? "pairwise" : "direct");
        }
        for (int i = 0; i < USIM_NPHASE && !bad; i++) {
            char key[32];
            snprintf(key, sizeof key, "phase_%d_ms", i);
            json_t *x = uly_json_add_object(o, key);
            bad |= !x || uly_json_set_str(x, "name", phase_names[i]) ||
                   uly_json_set_fixed(x, "predicted", 1e3 * r.phase_s[i], 6);
        }
        if (!bad) {
            bad |= uly_json_set_fixed(o, "forward_ms", 1e3 * r.fwd_s, 6);
            bad |= uly_json_set_fixed(o, "backward_ms", 1e3 * r.bwd_s, 6);
            bad |= uly_json_set_fixed(o, "iteration_ms", 1e3 * r.iter_s, 6);
            bad |= uly_json_set_int(o, "rank", rank);
            bad |= !(by = uly_json_add_object(o, "bytes"));
        }
        for (int w = 0; w < 8 && !bad; w++) {
            json_t *x = uly_json_add_object(by, a2a_names[w]);
            bad |= !x || uly_json_set_int(x, "sent", (int64_t)r.sent[w]) || uly_json_set_int(x, "recv", (int64_t)r.recv[w]);
        }
        if (!bad) {
            bad |= uly_json_set_fixed(o, "sent_intra_node", r.sent_class[USIM_CLASS_NVLINK], 0);
            bad |= uly_json_set_fixed(o, "sent_inter_node", r.sent_class[USIM_CLASS_NIC], 0);
        }
        if (uly_json_emit(stdout, o, bad, JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII | JSON_REAL_PRECISION(15))) {
            fprintf(stderr, "ulysses-sim: attn: cannot write the JSON output (out of memory or write error)\n");
            return 1;
        }
    } else {
        printf("ulysses attn on %d rank%s of %s (%d per node): B=%lld N=%lld H=%lld Hkv=%lld d=%lld mask=%s %s, "
               "%s all-to-all\n\n",
               j.gpus, j.gpus > 1 ? "s" : "", out_safe(p.name, pn), p.gpus_per_node, (long long)j.batch, (long long)j.seq,
               (long long)j.heads, (long long)j.kv_heads, (long long)j.head_dim, mask, usim_dtype_name(j.dtype),
               j.a2a == USIM_A2A_PAIRWISE ? "pairwise" : "direct");
        printf("%-26s %14s\n", "phase", "predicted ms");
        for (int i = 0; i < USIM_NPHASE; i++)
            printf("%-26s %14.3f\n", phase_names[i], 1e3 * r.phase_s[i]);
        printf("%-26s %14.3f\n%-26s %14.3f\n%-26s %14.3f\n", "forward", 1e3 * r.fwd_s, "backward", 1e3 * r.bwd_s,
               "iteration", 1e3 * r.iter_s);
        printf("\n%-6s %16s %16s   (rank %lld, bytes per call)\n", "a2a", "sent", "received", (long long)rank);
        for (int w = 0; w < 8; w++)
            printf("%-6s %16llu %16llu\n", a2a_names[w], (unsigned long long)r.sent[w],
                   (unsigned long long)r.recv[w]);
        printf("sent inside the node %.0f B, to other nodes %.0f B (whole job)\n", r.sent_class[USIM_CLASS_NVLINK],
               r.sent_class[USIM_CLASS_NIC]);
    }
    if (fflush(stdout)) {
        fprintf(stderr, "ulysses-sim: error writing the output\n");
        return 1;
    }
    return 0;
}
