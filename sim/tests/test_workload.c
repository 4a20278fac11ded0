/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_workload.c -- Check suite of the workload: per-GPU bytes equal the
 * closed-form formulas for every method (uneven heads, uneven sequence and
 * GQA included), determinism bit for bit, time accounting, configuration
 * errors, memory and --max-seq, the trace.
 */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ulysses_plan.h"
#include "compute.h"
#include "cost.h"
#include "usim.h"
#include "usim_internal.h"

static usim_platform a100(void)
{
    char path[1024];
    usim_platform p;
    ck_assert_int_eq(usim_preset_path("platforms", "dgx-a100-40g", path, sizeof path), USIM_OK);
    ck_assert_int_eq(usim_platform_load(path, &p), USIM_OK);
    return p;
}

static usim_model model(int64_t layers, int64_t hidden, int64_t heads, int64_t kv, int64_t seq)
{
    usim_model m;
    memset(&m, 0, sizeof m);
    strcpy(m.name, "test");
    m.layers = layers;
    m.hidden = hidden;
    m.heads = heads;
    m.kv_heads = kv;
    m.ffn = 4 * hidden;
    m.vocab = 32000;
    m.seq = seq;
    m.micro_batch = 1;
    m.global_batch = 1;
    m.dtype = USIM_BF16;
    m.causal = 1;
    m.tied_embeddings = 1;
    return m;
}

static usim_job job(uly_method me, int gpus, int sp)
{
    usim_job j;
    memset(&j, 0, sizeof j);
    j.method = me;
    j.gpus = gpus;
    j.sp = sp;
    j.zero = 3;
    j.recompute = USIM_RC_FULL;
    return j;
}

/* Closed forms of ARCHITECTURE/doc, even case, bf16 (e = 2), batch 1. */
START_TEST(test_bytes_even_closed_form)
{
    usim_platform p = a100();
    int P = 8;
    double N = 65536, h = 2048, e = 2;
    usim_model m = model(2, 2048, 16, 16, 65536);
    usim_sim *s = usim_sim_new(&p, 16);
    double sent[2], ana[2];
    /* Ulysses: (2h + 2h_kv) N/P e (P-1)/P per rank per layer forward */
    usim_job j = job(ULY_METHOD_ULYSSES, 16, P);
    ck_assert_int_eq(usim_sp_layer_bytes(s, &m, &j, 3, sent), USIM_OK);
    ck_assert(sent[0] == (2 * h + 2 * h) * N / P * e * (P - 1) / P);
    ck_assert(sent[1] == sent[0]);
    /* Megatron-SP: 4 (t-1)/t N h e */
    j = job(ULY_METHOD_MEGATRON_SP, 16, P);
    ck_assert_int_eq(usim_sp_layer_bytes(s, &m, &j, 5, sent), USIM_OK);
    ck_assert(sent[0] == 4.0 * (P - 1) / P * N * h * e);
    /* Ring: 2 (P-1) N/P h_kv e forward; backward K,V,dK,dV per hop + dK,dV home */
    static const uly_method rings[2] = {ULY_METHOD_RING, ULY_METHOD_ZIGZAG};
    for (int k = 0; k < 2; k++) {
        j = job(rings[k], 16, P);
        ck_assert_int_eq(usim_sp_layer_bytes(s, &m, &j, 0, sent), USIM_OK);
        ck_assert(sent[0] == 2.0 * (P - 1) * N / P * h * e);
        ck_assert(sent[1] == (4.0 * (P - 1) + 2) * N / P * h * e);
        ck_assert_int_eq(usim_analytic_sp_bytes(&m, &j, 0, ana), USIM_OK);
        ck_assert(ana[0] == sent[0] && ana[1] == sent[1]);
    }
    usim_sim_free(s);
}
END_TEST

/* Simulator counters == closed forms / uly_plan_volume, every GPU, awkward shapes. */
START_TEST(test_bytes_every_method_every_shape)
{
    usim_platform p = a100();
    struct { int64_t hidden, heads, kv, seq; int P, gpus, u; } cases[] = {
        {1024, 16, 16, 8192, 8, 16, 0},     /* even */
        {1536, 12, 12, 8192, 8, 16, 0},     /* uneven heads: 12 over 8 */
        {1024, 16, 16, 8197, 8, 8, 0},      /* uneven sequence */
        {2048, 16, 2, 12288, 8, 16, 0},     /* GQA, KV heads replicated */
        {2048, 32, 8, 16384, 16, 32, 4},    /* GQA, usp 4 x 4 */
        {1920, 15, 5, 10007, 6, 6, 3},      /* everything uneven, one node */
    };
    int ran = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        usim_model m = model(2, cases[c].hidden, cases[c].heads, cases[c].kv, cases[c].seq);
        usim_sim *s = usim_sim_new(&p, cases[c].gpus);
        for (int mi = 0; mi < ULY_METHOD_ALL; mi++) {
            int me = usim_method_order[mi];
            usim_job j = job((uly_method)me, cases[c].gpus, cases[c].P);
            j.ulysses = me == ULY_METHOD_USP ? cases[c].u : 0;
            usim_job chk = j;
            if (usim_job_resolve(&m, &p, &chk) != USIM_OK) {
                /* megatron-sp needs heads % tp == 0; zigzag 2 x CP equal chunks */
                ck_assert_msg(me == ULY_METHOD_MEGATRON_SP || strstr(usim_last_error(), "not a multiple of 2 x CP"),
                              "case %zu %s: %s", c, uly_method_sim_name((uly_method)me), usim_last_error());
                continue;
            }
            ran++;
            for (int g = 0; g < cases[c].gpus; g++) {
                double sent[2], ana[2];
                ck_assert_int_eq(usim_sp_layer_bytes(s, &m, &j, g, sent), USIM_OK);
                ck_assert_int_eq(usim_analytic_sp_bytes(&m, &j, g, ana), USIM_OK);
                ck_assert_msg(sent[0] == ana[0] && sent[1] == ana[1],
                              "case %zu %s gpu %d: simulated %.0f/%.0f analytic %.0f/%.0f", c,
                              uly_method_sim_name((uly_method)me), g, sent[0], sent[1], ana[0], ana[1]);
                ck_assert(sent[0] > 0);
            }
        }
        usim_sim_free(s);
    }
    /* 6 shapes x 6 methods, minus 2 impossible megatron-sp and the 3 zigzag methods
     * on the 2 sequences that are not a multiple of 2 x CP */
    ck_assert_int_eq(ran, 28);
}
END_TEST

/* The paper's claim: Ulysses per-GPU volume is constant when N and P grow
 * together; Megatron-SP's grows with N. */
START_TEST(test_volume_scaling)
{
    usim_model m1 = model(2, 4096, 32, 32, 32768), m2 = model(2, 4096, 32, 32, 65536);
    double u1[2], u2[2], g1[2], g2[2];
    usim_job j1 = job(ULY_METHOD_ULYSSES, 8, 8), j2 = job(ULY_METHOD_ULYSSES, 16, 16);
    ck_assert_int_eq(usim_analytic_sp_bytes(&m1, &j1, 0, u1), USIM_OK);
    ck_assert_int_eq(usim_analytic_sp_bytes(&m2, &j2, 0, u2), USIM_OK);
    /* 4Nh/P * (P-1)/P: equal up to the (P-1)/P factor */
    ck_assert(fabs(u2[0] / u1[0] - (15.0 / 16) / (7.0 / 8)) < 1e-12);
    j1 = job(ULY_METHOD_MEGATRON_SP, 8, 8);
    j2 = job(ULY_METHOD_MEGATRON_SP, 16, 16);
    ck_assert_int_eq(usim_analytic_sp_bytes(&m1, &j1, 0, g1), USIM_OK);
    ck_assert_int_eq(usim_analytic_sp_bytes(&m2, &j2, 0, g2), USIM_OK);
    ck_assert(g2[0] / g1[0] > 2);
}
END_TEST

START_TEST(test_determinism_and_accounting)
{
    usim_platform p = a100();
    usim_model m = model(4, 2048, 16, 4, 32768);
    m.global_batch = 4;
    for (int mi = 0; mi < ULY_METHOD_ALL; mi++) {
        int me = usim_method_order[mi];
        for (int z = 0; z <= 3; z++) {
            usim_job j = job((uly_method)me, 32, 16);
            j.zero = z;
            j.recompute = (usim_recompute)(z % 3);
            usim_sim *s1 = usim_sim_new(&p, 32), *s2 = usim_sim_new(&p, 32);
            usim_result a, b, c;
            ck_assert_msg(usim_simulate(s1, &m, &j, NULL, &a) == USIM_OK, "%s", usim_last_error());
            ck_assert_int_eq(usim_simulate(s2, &m, &j, NULL, &b), USIM_OK);
            ck_assert_int_eq(usim_simulate(s1, &m, &j, NULL, &c), USIM_OK);  /* memoized */
            ck_assert_int_eq(c.collectives_simulated, 0);
            c.collectives_simulated = a.collectives_simulated;
            ck_assert(memcmp(&a, &b, sizeof a) == 0);
            ck_assert(memcmp(&a, &c, sizeof a) == 0);
            /* iteration = compute + exposed communication (1 ps per op of slack) */
            double sum = a.compute_s;
            for (int k = 0; k < USIM_NKIND; k++) {
                sum += a.exposed_s[k];
                ck_assert(a.exposed_s[k] <= a.comm_s[k] + 1e-9);
            }
            ck_assert_msg(fabs(sum - a.iter_s) <= 1e-9 * a.iter_s + 1e-9,
                          "%s zero %d: iter %.9f vs compute+exposed %.9f",
                          uly_method_sim_name((uly_method)me), z, a.iter_s, sum);
            ck_assert(a.tflops > 0 && a.mfu > 0 && a.mfu < 1);
            ck_assert_int_eq(a.micro_steps, 2);
            usim_sim_free(s1);
            usim_sim_free(s2);
        }
    }
}
END_TEST

START_TEST(test_config_errors)
{
    usim_platform p = a100();
    usim_model m = model(2, 4096, 32, 8, 65536);
    usim_job j = job(ULY_METHOD_ULYSSES, 64, 64);
    ck_assert_int_eq(usim_job_resolve(&m, &p, &j), USIM_EINVAL);
    ck_assert_ptr_nonnull(strstr(usim_last_error(), "exceeds the 32 attention heads"));
    j = job(ULY_METHOD_ULYSSES, 64, 0);
    j.dp = 3;
    ck_assert_int_eq(usim_job_resolve(&m, &p, &j), USIM_EINVAL);
    ck_assert_ptr_nonnull(strstr(usim_last_error(), "do not multiply"));
    j = job(ULY_METHOD_ULYSSES, 64, 16);
    j.dp = 2;
    ck_assert_int_eq(usim_job_resolve(&m, &p, &j), USIM_EINVAL);
    ck_assert_ptr_nonnull(strstr(usim_last_error(), "do not multiply"));
    /* composed tensor parallelism: tp x cp x pp x dp = GPUs, heads per tensor rank */
    j = job(ULY_METHOD_RING, 64, 8);
    j.tp = 2;
    ck_assert_int_eq(usim_job_resolve(&m, &p, &j), USIM_OK);
    ck_assert_int_eq(j.dp, 4);
    j = job(ULY_METHOD_ULYSSES, 64, 32);
    j.tp = 2;
    ck_assert_int_eq(usim_job_resolve(&m, &p, &j), USIM_EINVAL);
    ck_assert_ptr_nonnull(strstr(usim_last_error(), "exceeds the 16 attention heads per tensor-parallel rank"));
    j = job(ULY_METHOD_ULYSSES, 48, 0);
    j.tp = 3;
    ck_assert_int_eq(usim_job_resolve(&m, &p, &j), USIM_EINVAL);
    ck_assert_ptr_nonnull(strstr(usim_last_error(), "TP degree 3 does not divide the 32 heads"));
    j = job(ULY_METHOD_ULYSSES, 48, 0);
    j.pp = 3;
    ck_assert_int_eq(usim_job_resolve(&m, &p, &j), USIM_EINVAL);
    ck_assert_ptr_nonnull(strstr(usim_last_error(), "--pp 3 does not divide the 2 layers"));
    j = job(ULY_METHOD_ALLGATHER, 64, 16);
    j.tp = 2;
    j.pp = 2;
    ck_assert_int_eq(usim_job_resolve(&m, &p, &j), USIM_OK);
    ck_assert_int_eq(j.dp, 1);
    j = job(ULY_METHOD_USP, 64, 32);
    j.tp = 2;   /* a2a defaults to the node: 8 / TP 2 = 4 */
    ck_assert_int_eq(usim_job_resolve(&m, &p, &j), USIM_OK);
    ck_assert_int_eq(j.ulysses, 4);
    j = job(ULY_METHOD_MEGATRON_SP, 64, 32);
    ck_assert_int_eq(usim_job_resolve(&m, &p, &j), USIM_OK);
    ck_assert_int_eq(j.tp, 32);
    j = job(ULY_METHOD_MEGATRON_SP, 64, 64);
    ck_assert_int_eq(usim_job_resolve(&m, &p, &j), USIM_EINVAL);   /* 32 % 64 */
    j = job(ULY_METHOD_MEGATRON_SP, 48, 48);
    ck_assert_int_eq(usim_job_resolve(&m, &p, &j), USIM_EINVAL);   /* 32 % 48 */
    j = job(ULY_METHOD_ULYSSES, 12, 4);
    ck_assert_int_eq(usim_job_resolve(&m, &p, &j), USIM_EINVAL);   /* 12 GPUs on 8-GPU nodes */
    ck_assert_ptr_nonnull(strstr(usim_last_error(), "multiple of 8"));
    j = job(ULY_METHOD_USP, 64, 64);
    j.ulysses = 3;
    ck_assert_int_eq(usim_job_resolve(&m, &p, &j), USIM_EINVAL);
    j = job(ULY_METHOD_USP, 64, 64);
    ck_assert_int_eq(usim_job_resolve(&m, &p, &j), USIM_OK);
    ck_assert_int_eq(j.ulysses, 8);
    /* default degrees: largest divisor of the GPU count <= heads */
    j = job(ULY_METHOD_ULYSSES, 64, 0);
    ck_assert_int_eq(usim_job_resolve(&m, &p, &j), USIM_OK);
    ck_assert_int_eq(j.sp, 32);
    ck_assert_int_eq(j.dp, 2);
    /* uneven heads are allowed for ulysses */
    usim_model u = model(2, 1536, 12, 12, 8192);
    j = job(ULY_METHOD_ULYSSES, 8, 8);
    ck_assert_int_eq(usim_job_resolve(&u, &p, &j), USIM_OK);
    j = job(ULY_METHOD_ULYSSES, 16, 16);
    ck_assert_int_eq(usim_job_resolve(&u, &p, &j), USIM_EINVAL);
}
END_TEST

START_TEST(test_memory_and_max_seq)
{
    usim_platform p = a100();
    usim_model m = model(32, 4096, 32, 32, 131072);
    m.vocab = 50257;
    usim_job j = job(ULY_METHOD_ULYSSES, 64, 32);
    usim_memory a, b;
    int fa, fb;
    ck_assert_int_eq(usim_memory_estimate(&p, &m, &j, &a, &fa), USIM_OK);
    m.seq *= 2;
    ck_assert_int_eq(usim_memory_estimate(&p, &m, &j, &b, &fb), USIM_OK);
    ck_assert(b.activations > a.activations && b.total > a.total);
    ck_assert(fabs(b.params - a.params) < 1);
    /* ZeRO stages partition what they promise */
    usim_memory z[4];
    for (int s = 0; s < 4; s++) {
        usim_job t = j;
        t.zero = s;
        ck_assert_int_eq(usim_memory_estimate(&p, &m, &t, &z[s], &fa), USIM_OK);
    }
    ck_assert(z[1].optim < z[0].optim && z[1].grads == z[0].grads);
    ck_assert(z[2].grads < z[1].grads && z[2].params == z[1].params);
    ck_assert(z[3].params < z[2].params);
    /* recompute: none > selective > full */
    usim_memory r[3];
    for (int k = 0; k < 3; k++) {
        usim_job t = j;
        t.recompute = (usim_recompute)k;
        ck_assert_int_eq(usim_memory_estimate(&p, &m, &t, &r[k], &fa), USIM_OK);
    }
    ck_assert(r[0].activations > r[1].activations && r[1].activations > r[2].activations);
    /* --max-seq: the answer fits, one granule more does not */
    int64_t best;
    ck_assert_int_eq(usim_max_seq(&p, &m, &j, &best), USIM_OK);
    ck_assert_int_gt(best, 0);
    ck_assert_int_eq(best % 32, 0);
    m.seq = best;
    ck_assert_int_eq(usim_memory_estimate(&p, &m, &j, &a, &fa), USIM_OK);
    ck_assert(fa);
    m.seq = best + 32;
    ck_assert_int_eq(usim_memory_estimate(&p, &m, &j, &a, &fa), USIM_OK);
    ck_assert(!fa);
}
END_TEST

START_TEST(test_trace)
{
    usim_platform p = a100();
    usim_model m = model(2, 2048, 16, 16, 16384);
    FILE *t = tmpfile();
    ck_assert_ptr_nonnull(t);
    for (int mi = 0; mi < ULY_METHOD_ALL; mi++) {
        int me = usim_method_order[mi];
        usim_sim *s = usim_sim_new(&p, 16);
        usim_job j = job((uly_method)me, 16, 16);
        usim_result r;
        rewind(t);
        ck_assert_int_eq(usim_simulate(s, &m, &j, t, &r), USIM_OK);
        fflush(t);
        long len = ftell(t);
        rewind(t);
        char *buf = malloc((size_t)len + 1);
        ck_assert_int_eq(fread(buf, 1, (size_t)len, t), (size_t)len);
        json_error_t je;
        json_t *root = json_loadb(buf, (size_t)len, 0, &je);
        ck_assert_msg(root != NULL, "%s: trace is not JSON: %s at %d:%d", uly_method_sim_name(j.method),
                      je.text, je.line, je.column);
        json_t *ev = json_object_get(root, "traceEvents");
        ck_assert(json_is_array(ev));
        size_t nx = 0, nlink = 0;
        double last_end = 0;
        for (size_t i = 0; i < json_array_size(ev); i++) {
            json_t *e = json_array_get(ev, i);
            if (strcmp(json_string_value(json_object_get(e, "ph")), "X") != 0)
                continue;
            nx++;
            if (json_integer_value(json_object_get(e, "pid")) == 2)
                nlink++;
            double end = json_number_value(json_object_get(e, "ts")) +
                         json_number_value(json_object_get(e, "dur"));
            if (end > last_end)
                last_end = end;
        }
        ck_assert_uint_gt(nx, 10);
        ck_assert_uint_gt(nlink, 0);
        ck_assert(fabs(last_end * 1e-6 - r.iter_s) < 1e-6 * r.iter_s + 1e-6);
        json_decref(root);
        free(buf);
        usim_sim_free(s);
    }
    fclose(t);
}
END_TEST

/* Overlapping communications share link classes: never faster than isolated. */
START_TEST(test_contention_monotone)
{
    usim_platform p = a100();
    usim_model m = model(4, 4096, 32, 32, 65536);
    m.global_batch = 2;
    for (int mi = 0; mi < ULY_METHOD_ALL; mi++) {
        int me = usim_method_order[mi];
        usim_job j = job((uly_method)me, 64, 32);
        usim_sim *s = usim_sim_new(&p, 64);
        usim_result on, off;
        ck_assert_int_eq(usim_simulate(s, &m, &j, NULL, &on), USIM_OK);
        usim_sim_set_contention(s, 0);
        ck_assert_int_eq(usim_simulate(s, &m, &j, NULL, &off), USIM_OK);
        ck_assert_msg(on.iter_s >= off.iter_s - 1e-12, "%s: %.9f < %.9f",
                      uly_method_sim_name(j.method), on.iter_s, off.iter_s);
        ck_assert(on.compute_s == off.compute_s);
        for (int k = 0; k < USIM_NCLASS; k++)
            ck_assert(on.sent_bytes[k] == off.sent_bytes[k]);
        usim_sim_free(s);
    }
}
END_TEST

/* Fail the Nth allocation for every N: each failure is reported as
 * USIM_ENOMEM (never ignored, never a crash; the sanitizer build also checks
 * that nothing leaks). */
START_TEST(test_alloc_failures)
{
    usim_platform p = a100();
    usim_model m = model(2, 1024, 8, 2, 8192);
    m.global_batch = 2;
    for (int mi = 0; mi < ULY_METHOD_ALL; mi++) {
        int me = usim_method_order[mi];
        usim_job j = job((uly_method)me, 16, 8);
        j.zero = mi % 4;
        long n;
        for (n = 1; n < 100000; n++) {
            usim_test_fail_alloc_at(n);
            usim_sim *s = usim_sim_new(&p, 16);
            int rc = USIM_ENOMEM;
            usim_result r;
            if (s) {
                rc = usim_simulate(s, &m, &j, NULL, &r);
                usim_sim_free(s);
            }
            long used = usim_test_fail_alloc_at(0);
            if (rc == USIM_OK) {
                ck_assert_msg(used < n, "%s: allocation %ld failed but the run succeeded",
                              uly_method_sim_name(j.method), n);
                break;
            }
            ck_assert_msg(rc == USIM_ENOMEM, "%s: allocation %ld failed: status %d (%s)",
                          uly_method_sim_name(j.method), n, rc, usim_last_error());
        }
        ck_assert_int_gt(n, 10);
    }
}
END_TEST

/* Speed: 1024 GPUs, 32 layers, forward + backward, every method. */
START_TEST(test_speed_1024)
{
    usim_platform p = a100();
    usim_model m = model(32, 4096, 32, 32, 131072);
    usim_sim *s = usim_sim_new(&p, 1024);
    for (int mi = 0; mi < ULY_METHOD_ALL; mi++) {
        int me = usim_method_order[mi];
        usim_job j = job((uly_method)me, 1024, 32);
        usim_result r;
        ck_assert_int_eq(usim_simulate(s, &m, &j, NULL, &r), USIM_OK);
        ck_assert(r.iter_s > 0);
    }
    usim_sim_free(s);
}
END_TEST

/* Composed tensor parallelism: simulated bytes == closed forms for every
 * method, every GPU (tensor collectives included), with uneven shapes. */
START_TEST(test_bytes_with_tp)
{
    usim_platform p = a100();
    struct { int64_t hidden, heads, kv, seq; int tp, P, gpus, u; } cases[] = {
        {2048, 16, 16, 16384, 2, 4, 16, 0},   /* even */
        {2048, 32, 8, 16384, 2, 8, 32, 2},    /* GQA, usp 2 x 4 */
        {2048, 16, 2, 12290, 4, 2, 16, 0},    /* KV heads replicated over TP, uneven sequence */
        {1920, 12, 4, 10007, 2, 3, 12, 3},    /* uneven, 12 GPUs on one... 12-GPU node */
    };
    int ran = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        usim_platform pc = p;
        if (cases[c].gpus == 12)
            pc.gpus_per_node = 12;
        usim_model m = model(2, cases[c].hidden, cases[c].heads, cases[c].kv, cases[c].seq);
        usim_sim *s = usim_sim_new(&pc, cases[c].gpus);
        for (int mi = 0; mi < ULY_METHOD_ALL; mi++) {
            int me = usim_method_order[mi];
            if (me == ULY_METHOD_MEGATRON_SP)
                continue;
            usim_job j = job((uly_method)me, cases[c].gpus, cases[c].P);
            j.tp = cases[c].tp;
            j.ulysses = me == ULY_METHOD_USP ? cases[c].u : 0;
            usim_job chk = j;
            int two = me == ULY_METHOD_ZIGZAG || me == ULY_METHOD_USP || me == ULY_METHOD_ALLGATHER;
            if (two && cases[c].seq % (2 * cases[c].P) != 0) {   /* refused: 2 x CP equal chunks */
                ck_assert_int_eq(usim_job_resolve(&m, &pc, &chk), USIM_EINVAL);
                ck_assert_ptr_nonnull(strstr(usim_last_error(), "not a multiple of 2 x CP"));
                continue;
            }
            ck_assert_msg(usim_job_resolve(&m, &pc, &chk) == USIM_OK, "case %zu %s: %s", c,
                          uly_method_sim_name((uly_method)me), usim_last_error());
            ran++;
            for (int g = 0; g < cases[c].gpus; g++) {
                double sent[2], ana[2];
                ck_assert_int_eq(usim_sp_layer_bytes(s, &m, &j, g, sent), USIM_OK);
                ck_assert_int_eq(usim_analytic_sp_bytes(&m, &j, g, ana), USIM_OK);
                ck_assert_msg(sent[0] == ana[0] && sent[1] == ana[1],
                              "case %zu %s tp %d gpu %d: simulated %.0f/%.0f analytic %.0f/%.0f", c,
                              uly_method_sim_name((uly_method)me), j.tp, g, sent[0], sent[1], ana[0], ana[1]);
                ck_assert(sent[0] > 0);
            }
        }
        usim_sim_free(s);
    }
    ck_assert_int_eq(ran, 14);   /* 4 shapes x 5 methods, minus 3 zigzag methods on 2 odd sequences */
}
END_TEST

/* Tensor parallelism shards parameters; pipeline stages hold L/pp layers and
 * min(pp, micro-steps) micro-batches; time accounting includes the bubble. */
START_TEST(test_composition_memory_and_time)
{
    usim_platform p = a100();
    usim_model m = model(4, 4096, 32, 8, 32768);
    m.global_batch = 8;
    usim_memory a, b;
    int fa, fb;
    usim_job j1 = job(ULY_METHOD_ULYSSES, 32, 8), j2 = job(ULY_METHOD_ULYSSES, 32, 8);
    j1.zero = j2.zero = 0;
    j2.tp = 2;
    ck_assert_int_eq(usim_memory_estimate(&p, &m, &j1, &a, &fa), USIM_OK);
    ck_assert_int_eq(usim_memory_estimate(&p, &m, &j2, &b, &fb), USIM_OK);
    ck_assert(fabs(b.params / a.params - 0.5) < 1e-12);
    ck_assert(b.activations < a.activations);   /* layer inputs split T ways (sequence parallelism) */
    usim_job j3 = job(ULY_METHOD_ULYSSES, 32, 8);
    j3.zero = 0;
    j3.pp = 2;
    usim_memory c;
    int fc;
    ck_assert_int_eq(usim_memory_estimate(&p, &m, &j3, &c, &fc), USIM_OK);
    /* half the layers' parameters (the embedding stays), the same activations (2 in flight x L/2) */
    ck_assert(c.params < 0.75 * a.params);
    ck_assert(fabs(c.activations - a.activations) <= 1e-9 * a.activations);
    /* time: compute + exposed + bubble = iteration, bubble > 0 only with pp */
    for (int pp = 1; pp <= 2; pp++)
        for (int mi = 0; mi < ULY_METHOD_ALL; mi++) {
            int me = usim_method_order[mi];
            usim_job j = job((uly_method)me, 32, me == ULY_METHOD_MEGATRON_SP ? 8 : 4);
            j.pp = pp;
            if (me != ULY_METHOD_MEGATRON_SP)
                j.tp = 2;
            usim_sim *s = usim_sim_new(&p, 32);
            usim_result r;
            ck_assert_msg(usim_simulate(s, &m, &j, NULL, &r) == USIM_OK, "%s", usim_last_error());
            double sum = r.compute_s + r.bubble_s;
            for (int k = 0; k < USIM_NKIND; k++)
                sum += r.exposed_s[k];
            ck_assert_msg(fabs(sum - r.iter_s) <= 1e-9 * r.iter_s + 1e-9, "%s pp %d: %.9f vs %.9f",
                          uly_method_sim_name(j.method), pp, sum, r.iter_s);
            ck_assert(pp == 1 ? r.bubble_s == 0 : r.bubble_s > 0);
            ck_assert(r.mfu > 0 && r.mfu < 1);
            usim_sim_free(s);
        }
}
END_TEST

/* Placement is printed in words: which dimensions sit inside a node. */
START_TEST(test_placement)
{
    usim_platform p = a100();
    usim_model m = model(4, 4096, 32, 8, 32768);
    char buf[200];
    usim_job j = job(ULY_METHOD_ULYSSES, 32, 4);
    j.tp = 2;
    ck_assert_int_eq(usim_job_resolve(&m, &p, &j), USIM_OK);
    usim_job_placement(&p, &j, buf, sizeof buf);
    ck_assert_str_eq(buf, "tp 2 x cp 4 inside a node; dp 4 across nodes");
    j = job(ULY_METHOD_USP, 32, 16);
    j.ulysses = 8;
    ck_assert_int_eq(usim_job_resolve(&m, &p, &j), USIM_OK);
    usim_job_placement(&p, &j, buf, sizeof buf);
    ck_assert_str_eq(buf, "cp a2a 8 inside a node; cp p2p 2 x dp 2 across nodes");
    j = job(ULY_METHOD_RING, 32, 16);
    ck_assert_int_eq(usim_job_resolve(&m, &p, &j), USIM_OK);
    usim_job_placement(&p, &j, buf, sizeof buf);
    ck_assert_str_eq(buf, "cp 16 (8 per node) x dp 2 across nodes");
}
END_TEST

/* The ring methods' volumes come from the plan layer, the one the MPI
 * library's counters are tested against (tests/test_methods.c): for a
 * sequence that splits evenly into 2R chunks, every GPU's simulated bytes
 * per layer equal uly_plan_method_volume of its rank for the unmasked
 * problem (the simulator makes every hop), forward and backward; uneven
 * heads, GQA and KV heads replicated in usp groups included (exactly for
 * the usp group members with the busiest ring, at least for the others). */
START_TEST(test_ring_bytes_from_plan)
{
    usim_platform p = a100();
    struct { int64_t hidden, heads, kv, seq; int P, u; } cases[] = {
        {1024, 16, 16, 8192, 8, 0},     /* even */
        {1536, 12, 12, 8208, 8, 0},     /* heads 12 over 8; N = 8208 = 513 x 16 */
        {2048, 16, 2, 12288, 8, 4},     /* GQA, KV heads replicated in usp groups of 4 */
        {1792, 14, 7, 8192, 8, 4},      /* 14 heads over U = 4 */
        {1920, 15, 5, 10080, 6, 3},     /* everything odd, one node */
    };
    const uly_method ms[3] = {ULY_METHOD_RING, ULY_METHOD_ZIGZAG, ULY_METHOD_USP};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        usim_model m = model(2, cases[c].hidden, cases[c].heads, cases[c].kv, cases[c].seq);
        const int P = cases[c].P;
        usim_sim *s = usim_sim_new(&p, P);
        for (int k = 0; k < 3; k++) {
            if (ms[k] == ULY_METHOD_USP && !cases[c].u)
                continue;
            usim_job j = job(ms[k], P, P);
            j.ulysses = ms[k] == ULY_METHOD_USP ? cases[c].u : 0;
            const int lm = ms[k];
            uly_sp_plan pl;
            ck_assert_int_eq(uly_sp_plan_init(&pl, lm, P, j.ulysses, ULY_PLACE_ULYSSES_INNER), ULY_OK);
            uly_attn_desc a = {.batch = 1, .seq = m.seq, .heads = m.heads, .kv_heads = m.kv_heads,
                               .head_dim = m.hidden / m.heads, .dtype = ULY_F32};
            for (int g = 0; g < P; g++) {
                double sent[2], plan[2] = {0, 0};
                ck_assert_int_eq(usim_sp_layer_bytes(s, &m, &j, g, sent), USIM_OK);
                uly_volume v;
                ck_assert_int_eq(uly_plan_method_volume(&a, &pl, g, &v), ULY_OK);
                for (int w = 0; w < ULY_VOL_COUNT; w++)
                    plan[uly_vol_backward(w)] += (double)v.sent[w] / 4 * 2;   /* f32 -> bf16 */
                /* usp whose group members hold different KV heads: every ring carries the
                 * busiest member's hops, so the others are over-estimated, never under */
                int u, jj;
                uint64_t mine = 0, most = 0;
                uly_plan_grid(&pl, g, &u, &jj);
                for (int x = 0; x < pl.U; x++) {
                    uint64_t h = uly_plan_ring_hop(&a, &pl, uly_plan_grid_rank(&pl, x, 0), 0, ULY_RING_BK) +
                                 uly_plan_ring_hop(&a, &pl, uly_plan_grid_rank(&pl, x, 0), 0, ULY_RING_DK);
                    most = h > most ? h : most;
                    mine = x == u ? h : mine;
                }
                if (mine == most)
                    ck_assert_msg(sent[0] == plan[0] && sent[1] == plan[1],
                                  "case %zu %s gpu %d: simulated %.0f/%.0f, plan %.0f/%.0f", c,
                                  uly_method_sim_name(ms[k]), g, sent[0], sent[1], plan[0], plan[1]);
                else
                    ck_assert_msg(sent[0] >= plan[0] && sent[1] >= plan[1] && sent[1] > 0,
                                  "case %zu %s gpu %d: simulated %.0f/%.0f below the plan %.0f/%.0f", c,
                                  uly_method_sim_name(ms[k]), g, sent[0], sent[1], plan[0], plan[1]);
            }
        }
        usim_sim_free(s);
    }
}
END_TEST

/*
 * Unfused attention (doc/simulator.md, "Unfused attention"), by hand on a
 * platform of round numbers: 1 TFLOP/s at efficiency 1, 1 TB/s, no launch
 * cost, fp16 (e = 2).  2 matrices of tq = tk = 1000 (E = 2e6 scores), d = 100:
 *   one GEMM: 2 E d = 4e8 FLOPs = 400 us; its bytes Q (or O) 2 x 1000 x 100
 *   x 2 = 4e5, K (or V) 4e5, the scores E e = 4e6: 4.8e6 B = 4.8 us, so
 *   compute-bound: 400 us.
 *   softmax forward 2 E e = 8e6 B = 8 us; backward 3 E e = 12 us.
 *   dropout E (2e + 1) = 1e7 B = 10 us each way.
 *   forward  = 400 + 8 + 400 = 808 us; with dropout 818 us.
 *   backward = 4 x 400 + 12 = 1612 us; with dropout 1622 us.
 * k_half 100: K = d = 100 doubles QK^T and dP' = dO V^T (800 us), K = 1000
 * makes the other GEMMs 440 us: forward 800 + 8 + 440 = 1248 us, backward
 * 800 + 3 x 440 + 12 = 2132 us.
 * d = 1: one GEMM 2 E = 4e6 FLOPs = 4 us against 2 x 2000 + 2 x 2000 + 4e6
 * = 4.008e6 B = 4.008 us: memory-bound, the forward 2 x 4.008 + 8 = 16.016 us.
 */
START_TEST(test_unfused_attention_kernel)
{
    usim_platform p;
    memset(&p, 0, sizeof p);
    for (int t = 0; t < USIM_NDTYPE; t++)
        p.peak_flops[t] = 1e12;
    p.gemm_eff = p.attn_eff = 1;
    p.hbm_Bps = 1e12;
    const double E = 2e6, us = 1e-6, tol = 1e-12;
    ck_assert_double_eq_tol(usim_attn_unfused_s(&p, USIM_FP16, E, 100, 1000, 1000, 0, 0), 808 * us, tol);
    ck_assert_double_eq_tol(usim_attn_unfused_s(&p, USIM_FP16, E, 100, 1000, 1000, 0, 1), 818 * us, tol);
    ck_assert_double_eq_tol(usim_attn_unfused_s(&p, USIM_FP16, E, 100, 1000, 1000, 1, 0), 1612 * us, tol);
    ck_assert_double_eq_tol(usim_attn_unfused_s(&p, USIM_FP16, E, 100, 1000, 1000, 1, 1), 1622 * us, tol);
    ck_assert_double_eq_tol(usim_attn_unfused_s(&p, USIM_FP16, E, 1, 1000, 1000, 0, 0), 16.016 * us, tol);
    ck_assert(usim_attn_unfused_s(&p, USIM_FP16, 0, 100, 1000, 1000, 0, 0) == 0);
    p.gemm_k_half = 100;
    ck_assert_double_eq_tol(usim_attn_unfused_s(&p, USIM_FP16, E, 100, 1000, 1000, 0, 0), 1248 * us, tol);
    ck_assert_double_eq_tol(usim_attn_unfused_s(&p, USIM_FP16, E, 100, 1000, 1000, 1, 0), 2132 * us, tol);
}
END_TEST

/*
 * The kernel in a job: megatron-sp, TP 8, 32 heads (4 per GPU), s = 4096,
 * micro-batch 1, fp16 on dgx-a100-40g.  Memory: the unfused job holds, over
 * the fused one, the recomputed layer's softmax output, mask and dropped
 * probabilities, E (2e + 1), plus the backward's dP and dS, 2 E e, with
 * E = 4 x 4096^2; selective recompute stores none of them per layer (it
 * recomputes the core) and keeps only the 2 E e.  Time: every layer's two
 * forward attentions (the forward and its recomputation) and its backward
 * take the kernel's time instead of FlashAttention's, per micro-step, and
 * nothing else changes; with selective recompute the one forward, the
 * backward and the core's recomputation before it.  Methods that combine blockwise partial results
 * refuse it; dropout without it is refused.
 */
START_TEST(test_unfused_attention_job)
{
    usim_platform p = a100();
    usim_model m = model(4, 4096, 32, 32, 4096);
    m.dtype = USIM_FP16;
    m.global_batch = 2;
    usim_job fl = job(ULY_METHOD_MEGATRON_SP, 8, 8);
    fl.zero = 0;
    usim_job un = fl;
    un.attn_kernel = USIM_ATTN_UNFUSED;
    un.attn_dropout = 1;
    const double e = 2, E = 4.0 * 4096 * 4096;
    usim_memory a, b;
    int fa, fb;
    ck_assert_int_eq(usim_memory_estimate(&p, &m, &fl, &a, &fa), USIM_OK);
    ck_assert_int_eq(usim_memory_estimate(&p, &m, &un, &b, &fb), USIM_OK);
    ck_assert_double_eq_tol(b.activations - a.activations, E * (2 * e + 1), 1);
    ck_assert_double_eq_tol(b.buffers - a.buffers, 2 * E * e, 1);
    ck_assert_double_eq_tol(b.total - a.total, E * (2 * e + 1) + 2 * E * e, 1);
    usim_job fs = fl, us_ = un;
    fs.recompute = us_.recompute = USIM_RC_SELECTIVE;
    ck_assert_int_eq(usim_memory_estimate(&p, &m, &fs, &a, &fa), USIM_OK);
    ck_assert_int_eq(usim_memory_estimate(&p, &m, &us_, &b, &fb), USIM_OK);
    ck_assert_double_eq_tol(b.activations - a.activations, 0, 1);
    ck_assert_double_eq_tol(b.total - a.total, 2 * E * e, 1);

    usim_sim *sim = usim_sim_new(&p, 8);
    usim_result ra, rb;
    ck_assert_msg(usim_simulate(sim, &m, &fl, NULL, &ra) == USIM_OK, "%s", usim_last_error());
    ck_assert_msg(usim_simulate(sim, &m, &un, NULL, &rb) == USIM_OK, "%s", usim_last_error());
    /* rank 0: 4 heads on 4096 queries, d = 128; FlashAttention's FLOPs over
     * the causal pairs the preset's kernels skip to */
    double pairs = p.attn_causal_skip ? 4096.0 * 4097 / 2 : 4096.0 * 4096;
    double fwd_fl = 4 * 128.0 * 4 * pairs;
    double flash = 2 * usim_attn_s(&p, USIM_FP16, fwd_fl, 1, 4, 4096, 128) +
                   usim_attn_bwd_s(&p, USIM_FP16, USIM_ATTN_BWD_FACTOR * fwd_fl, 1, 4, 4096, 128);
    double unf = 2 * usim_attn_unfused_s(&p, USIM_FP16, E, 128, 4096, 4096, 0, 1) +
                 usim_attn_unfused_s(&p, USIM_FP16, E, 128, 4096, 4096, 1, 1);
    double want = 4 /* layers */ * 2 /* micro-steps */ * (unf - flash);
    ck_assert_msg(fabs((rb.compute_s - ra.compute_s) - want) <= 1e-9 + 1e-9 * want,
                  "compute %.9f - %.9f vs %.9f", rb.compute_s, ra.compute_s, want);
    ck_assert(rb.iter_s > ra.iter_s);
    /* selective recompute: one forward per layer, and the backward recomputes
     * the unfused core (its scores were not stored) */
    ck_assert_int_eq(usim_simulate(sim, &m, &fs, NULL, &ra), USIM_OK);
    ck_assert_int_eq(usim_simulate(sim, &m, &us_, NULL, &rb), USIM_OK);
    flash = usim_attn_s(&p, USIM_FP16, fwd_fl, 1, 4, 4096, 128) +
            usim_attn_bwd_s(&p, USIM_FP16, USIM_ATTN_BWD_FACTOR * fwd_fl, 1, 4, 4096, 128);
    unf = 2 * usim_attn_unfused_s(&p, USIM_FP16, E, 128, 4096, 4096, 0, 1) +
          usim_attn_unfused_s(&p, USIM_FP16, E, 128, 4096, 4096, 1, 1);
    want = 4 * 2 * (unf - flash);
    ck_assert_msg(fabs((rb.compute_s - ra.compute_s) - want) <= 1e-9 + 1e-9 * want,
                  "selective: compute %.9f - %.9f vs %.9f", rb.compute_s, ra.compute_s, want);
    usim_sim_free(sim);

    usim_job bad = job(ULY_METHOD_RING, 8, 8);
    bad.attn_kernel = USIM_ATTN_UNFUSED;
    ck_assert_int_eq(usim_job_resolve(&m, &p, &bad), USIM_EINVAL);
    ck_assert(strstr(usim_last_error(), "fused kernel") != NULL);
    bad = fl;
    bad.attn_dropout = 1;
    ck_assert_int_eq(usim_job_resolve(&m, &p, &bad), USIM_EINVAL);
    bad = fl;
    bad.attn_kernel = 7;
    ck_assert_int_eq(usim_job_resolve(&m, &p, &bad), USIM_EINVAL);
}
END_TEST

static Suite *make_workload_suite(void)
{
    Suite *s = suite_create("workload");
    TCase *tc = tcase_create("bytes");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_bytes_even_closed_form);
    tcase_add_test(tc, test_bytes_every_method_every_shape);
    tcase_add_test(tc, test_ring_bytes_from_plan);
    tcase_add_test(tc, test_volume_scaling);
    tcase_add_test(tc, test_bytes_with_tp);
    suite_add_tcase(s, tc);
    tc = tcase_create("run");
    tcase_set_timeout(tc, 300);   /* the allocation-failure sweep, under sanitizers on a loaded machine */
    tcase_add_test(tc, test_determinism_and_accounting);
    tcase_add_test(tc, test_config_errors);
    tcase_add_test(tc, test_memory_and_max_seq);
    tcase_add_test(tc, test_trace);
    tcase_add_test(tc, test_contention_monotone);
    tcase_add_test(tc, test_alloc_failures);
    tcase_add_test(tc, test_speed_1024);
    tcase_add_test(tc, test_composition_memory_and_time);
    tcase_add_test(tc, test_placement);
    tcase_add_test(tc, test_unfused_attention_kernel);
    tcase_add_test(tc, test_unfused_attention_job);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(make_workload_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
