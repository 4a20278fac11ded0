/*
 * attn.c -- `ulysses-sim attn`: predict one distributed attention forward +
 * backward, phase by phase, as `ulysses attn` runs and times it (the same
 * options for the shape), on a platform file -- typically one written by
 * `ulysses calibrate` (doc/validation.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opts.h"

int cmd_attn(int argc, char **argv);

static const char attn_usage[] =
    "usage: ulysses-sim attn --platform PRESET|FILE [--gpus P] [--batch B] [--seq N] [--heads H]\n"
    "                        [--kv-heads Hkv] [--head-dim d] [--causal] [--dtype fp32|bf16|fp16]\n"
    "                        [--a2a direct|pairwise] [--rank R] [--format table|json]\n"
    "\n"
    "Predicts the phases `ulysses attn --backward` times on P ranks (P = --gpus, default 1):\n"
    "all-to-all in (q, k, v), attention, all-to-all out (o), and the same for the backward\n"
    "(do in; dq, dk, dv out), plus the bytes rank R (default 0) sends and receives in each\n"
    "all-to-all.  Shape defaults are those of `ulysses attn`: B=1 N=1024 H=8 Hkv=H d=64, fp32.\n";

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

int cmd_attn(int argc, char **argv)
{
    const char *platform = NULL;
    usim_attn_job j;
    memset(&j, 0, sizeof j);
    j.batch = 1; j.seq = 1024; j.heads = 8; j.kv_heads = 0; j.head_dim = 64; j.dtype = USIM_FP32;
    j.gpus = 1; j.a2a = USIM_A2A_DIRECT;
    int64_t rank = 0;
    int json = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(attn_usage, stdout);
            return 0;
        } else if (!strcmp(a, "--causal")) {
            j.causal = 1;
            continue;
        } else if (!strcmp(a, "--platform")) {
            if (!v)
                die_usage("attn: --platform needs a value");
            platform = v;
        } else if (!strcmp(a, "--gpus")) {
            j.gpus = (int)count_arg(a, v, 1 << 20);
        } else if (!strcmp(a, "--batch")) {
            j.batch = count_arg(a, v, 1 << 20);
        } else if (!strcmp(a, "--seq")) {
            j.seq = count_arg(a, v, INT64_MAX / 2);
        } else if (!strcmp(a, "--heads")) {
            j.heads = count_arg(a, v, 1 << 20);
        } else if (!strcmp(a, "--kv-heads")) {
            j.kv_heads = count_arg(a, v, 1 << 20);
        } else if (!strcmp(a, "--head-dim")) {
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
            else die_usage("attn: --format '%s': expected table or json", v ? v : "");
        } else {
            die_usage("attn: unknown option '%s' (see ulysses-sim attn --help)", a);
        }
        i++;
    }
    if (!platform)
        die_usage("attn: --platform is required (a preset or a file written by ulysses calibrate)");
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
    const char *mask = j.causal ? "causal" : "none";
    if (json) {
        printf("{\"platform\": \"%s\", \"gpus\": %d, \"gpus_per_node\": %d, \"batch\": %lld, \"seq\": %lld, "
               "\"heads\": %lld, \"kv_heads\": %lld, \"head_dim\": %lld, \"mask\": \"%s\", \"dtype\": \"%s\", "
               "\"a2a\": \"%s\"",
               p.name, j.gpus, p.gpus_per_node, (long long)j.batch, (long long)j.seq, (long long)j.heads,
               (long long)j.kv_heads, (long long)j.head_dim, mask, usim_dtype_name(j.dtype),
               j.a2a == USIM_A2A_PAIRWISE ? "pairwise" : "direct");
        for (int i = 0; i < USIM_NPHASE; i++)
            printf(", \"phase_%d_ms\": {\"name\": \"%s\", \"predicted\": %.6f}", i, phase_names[i], 1e3 * r.phase_s[i]);
        printf(", \"forward_ms\": %.6f, \"backward_ms\": %.6f, \"iteration_ms\": %.6f", 1e3 * r.fwd_s, 1e3 * r.bwd_s,
               1e3 * r.iter_s);
        printf(", \"rank\": %lld, \"bytes\": {", (long long)rank);
        for (int w = 0; w < 8; w++)
            printf("%s\"%s\": {\"sent\": %llu, \"recv\": %llu}", w ? ", " : "", a2a_names[w],
                   (unsigned long long)r.sent[w], (unsigned long long)r.recv[w]);
        printf("}, \"sent_intra_node\": %.0f, \"sent_inter_node\": %.0f}\n", r.sent_class[USIM_CLASS_NVLINK],
               r.sent_class[USIM_CLASS_NIC]);
    } else {
        printf("ulysses attn on %d rank%s of %s (%d per node): B=%lld N=%lld H=%lld Hkv=%lld d=%lld mask=%s %s, "
               "%s all-to-all\n\n",
               j.gpus, j.gpus > 1 ? "s" : "", p.name, p.gpus_per_node, (long long)j.batch, (long long)j.seq,
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
