/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_infer.c -- sequence-parallel inference under mpirun (P = 1..4):
 *  - after the prefill (every SP method in turn) each rank's KV-cache shard
 *    holds exactly the layout's tokens of the full K, V (bitwise), and the
 *    KV move's bytes equal uly_plan_prefill_kv_volume;
 *  - decode steps of dcp and helix over contiguous, round-robin:2 and :3
 *    layouts, GQA (H 8, Hkv 2, fp32) and MQA (H 5, Hkv 1, fp64): bitwise
 *    equal to uly_decode_emulate with the same P and layout, within
 *    tolerance of the float64 reference (fp32 atol 3e-6 rtol 3e-5, fp64
 *    atol 1e-11 rtol 1e-9), bytes == uly_plan_decode_volume every step
 *    (and with 2 heads, ranks without heads on 3 and 4 ranks),
 *    and the same per-step bytes for two prompt lengths;
 *  - uly_infer_memory lists the bytes the create allocates;
 *  - bad options (capacity below the prompt, non-causal, documents) give
 *    ULY_EINVAL on every rank, a full cache ULY_ERANGE.
 * Runs with CK_FORK=no; tests/test_infer.sh adds a timeout.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "ulysses_dist.h"

static int P, rank;

/* The library's allocation counter (src/error.c): bytes the hooks were
 * asked for since the last call. */
uint64_t uly_test_alloc_bytes(void);

static uly_attn_desc mkdesc(int64_t B, int64_t N, int64_t H, int64_t Hkv, int64_t d, uly_dtype t)
{
    uly_attn_desc a;
    memset(&a, 0, sizeof a);
    a.batch = B; a.seq = N; a.heads = H; a.kv_heads = Hkv; a.head_dim = d;
    a.causal = 1;
    a.dtype = t;
    return a;
}

/* Rows [t0, t0 + n) of a (B, N, X) tensor of es-byte elements into dst. */
static void take_rows(const char *src, char *dst, int64_t B, int64_t N, int64_t X, int64_t t0, int64_t n, size_t es)
{
    for (int64_t b = 0; b < B; b++)
        memcpy(dst + (size_t)(b * n * X) * es, src + (size_t)((b * N + t0) * X) * es, (size_t)(n * X) * es);
}

static uint64_t vol_total(const uly_decode_volume *v)
{
    uint64_t s = 0;
    for (int w = 0; w < ULY_DEC_COUNT; w++)
        s += v->sent[w] + v->recv[w];
    return s;
}

/*
 * One run: prefill of `prompt` tokens by `method`, then `steps` decode
 * steps; every check above on the way.  step_bytes[s] gets this rank's
 * bytes of step s.
 */
static void run_infer(const uly_attn_desc *full, int64_t prompt, int steps, int method, int scheme, int kind,
                      int64_t block, uint64_t *step_bytes)
{
    const int64_t B = full->batch, N = full->seq, H = full->heads, Hkv = full->kv_heads, d = full->head_dim;
    const uly_dtype t = full->dtype;
    const size_t es = uly_dtype_size(t);
    ck_assert_int_ge(N, prompt + steps);
    tu_problem pr;
    tu_problem_init(&pr, full, 1234);
    char *q = malloc(pr.nq * es), *k = malloc(pr.nkv * es), *v = malloc(pr.nkv * es);
    tu_convert(pr.q, q, pr.nq, t);
    tu_convert(pr.k, k, pr.nkv, t);
    tu_convert(pr.v, v, pr.nkv, t);

    uly_attn_desc a = *full;
    a.seq = prompt;
    uly_infer_opts o;
    memset(&o, 0, sizeof o);
    o.prefill.method = method;
    o.prefill.dist.a2a_mode = ULY_A2A_PACK;
    o.scheme = scheme;
    o.kv_kind = kind;
    o.kv_block = block;
    o.capacity = prompt + steps;
    o.threads = 1;
    uly_infer *s = NULL;
    uly_test_alloc_bytes(); /* reset the counter */
    ck_assert_msg(uly_infer_create(MPI_COMM_WORLD, &a, &o, &s) == ULY_OK, "%s", uly_last_error());
    const uint64_t allocated = uly_test_alloc_bytes();
    uly_bufs mem;
    memset(&mem, 0, sizeof mem);
    ck_assert_int_eq(uly_infer_memory(&a, &o, P, rank, &mem), ULY_OK);
    /* the memory table is what the create allocated */
    ck_assert_uint_eq(allocated, uly_bufs_sum(&mem, ULY_BUF_HEAP));
    uly_kv_layout L;
    ck_assert_int_eq(uly_kv_layout_init(&L, kind, P, block, prompt), ULY_OK);
    const int64_t cap_r = uly_kv_count(&L, rank, o.capacity);
    /* the memory table names the cache shard with its size (64-byte rounded) */
    int found = 0;
    for (int i = 0; i < mem.n; i++)
        if (!strcmp(mem.b[i].name, "KV cache K")) {
            ck_assert_uint_eq(mem.b[i].bytes, ((uint64_t)(B * cap_r * Hkv * d) * es + 63) / 64 * 64);
            found++;
        }
    ck_assert_int_eq(found, 1);

    /* prefill: this rank's token segments of the prompt */
    int64_t tb[2], tc[2];
    const int ns = uly_sp_tokens(uly_infer_prefill_ctx(s), tb, tc);
    const int64_t nr = tc[0] + (ns > 1 ? tc[1] : 0);
    char *lq = malloc((size_t)(B * nr * H * d) * es + 1), *lk = malloc((size_t)(B * nr * Hkv * d) * es + 1);
    char *lv = malloc((size_t)(B * nr * Hkv * d) * es + 1), *lo = malloc((size_t)(B * nr * H * d) * es + 1);
    for (int64_t b = 0; b < B; b++)
        for (int i = 0, r = 0; i < ns; i++)
            for (int64_t x = tb[i]; x < tb[i] + tc[i]; x++, r++) {
                memcpy(lq + (size_t)((b * nr + r) * H * d) * es, q + (size_t)((b * N + x) * H * d) * es,
                       (size_t)(H * d) * es);
                memcpy(lk + (size_t)((b * nr + r) * Hkv * d) * es, k + (size_t)((b * N + x) * Hkv * d) * es,
                       (size_t)(Hkv * d) * es);
                memcpy(lv + (size_t)((b * nr + r) * Hkv * d) * es, v + (size_t)((b * N + x) * Hkv * d) * es,
                       (size_t)(Hkv * d) * es);
            }
    ck_assert_msg(uly_infer_prefill(s, lq, lk, lv, lo) == ULY_OK, "%s", uly_last_error());
    ck_assert_int_eq(uly_infer_length(s), prompt);
    const void *ck, *cv;
    int64_t rows;
    uly_infer_cache(s, &ck, &cv, &rows);
    ck_assert_int_eq(rows, uly_kv_count(&L, rank, prompt));
    for (int64_t x = 0; x < prompt; x++) {
        if (uly_kv_owner(&L, x) != rank)
            continue;
        const int64_t r = uly_kv_row(&L, x);
        for (int64_t b = 0; b < B; b++) {
            const size_t off = (size_t)((b * N + x) * Hkv * d) * es, at = (size_t)((b * cap_r + r) * Hkv * d) * es;
            ck_assert_mem_eq((const char *)ck + at, k + off, (size_t)(Hkv * d) * es);
            ck_assert_mem_eq((const char *)cv + at, v + off, (size_t)(Hkv * d) * es);
        }
    }
    uly_decode_volume dv, dv0;
    uint64_t ks, kr, pks, pkr;
    uly_infer_volume(s, &dv, &ks, &kr);
    uly_sp_plan plan;
    uly_sp_get_plan(uly_infer_prefill_ctx(s), &plan);
    ck_assert_int_eq(uly_plan_prefill_kv_volume(&a, &plan, &L, rank, &pks, &pkr), ULY_OK);
    ck_assert_uint_eq(ks, pks);
    ck_assert_uint_eq(kr, pkr);
    ck_assert_uint_eq(vol_total(&dv), 0);

    /* decode steps */
    int64_t hb, hc;
    uly_infer_heads(s, &hb, &hc);
    char *nq = malloc((size_t)(B * H * d) * es), *mq = malloc((size_t)(B * H * d) * es + 1);
    char *nk = malloc((size_t)(B * Hkv * d) * es), *nv = malloc((size_t)(B * Hkv * d) * es);
    char *od = malloc((size_t)(B * H * d) * es + 1), *ld = malloc((size_t)(B * H) * es + 1);
    char *oe = malloc((size_t)(B * H * d) * es), *le = malloc((size_t)(B * H) * es);
    char *pk = malloc(pr.nkv * es), *pv = malloc(pr.nkv * es);
    double *ro = malloc(pr.nq * sizeof(double)), *rl = malloc(pr.nlse * sizeof(double));
    double *rq = malloc(pr.nq * sizeof(double)), *rk = malloc(pr.nkv * sizeof(double)), *rv = malloc(pr.nkv * sizeof(double));
    double *ref_o = malloc((size_t)(B * hc * d + 1) * sizeof(double)), *ref_l = malloc((size_t)(B * hc + 1) * sizeof(double));
    uly_decode_volume plan_v;
    ck_assert_int_eq(uly_plan_decode_volume(&a, scheme, P, rank, &plan_v), ULY_OK);
    for (int st = 0; st < steps; st++) {
        const int64_t pos = prompt + st, n = pos + 1;
        take_rows(q, nq, B, N, H * d, pos, 1, es);
        take_rows(k, nk, B, N, Hkv * d, pos, 1, es);
        take_rows(v, nv, B, N, Hkv * d, pos, 1, es);
        for (int64_t b = 0; b < B; b++) /* dcp: this rank's heads only */
            memcpy(mq + (size_t)(b * hc * d) * es, nq + (size_t)((b * H + hb) * d) * es, (size_t)(hc * d) * es);
        uly_infer_volume(s, &dv0, NULL, NULL);
        ck_assert_msg(uly_infer_decode(s, scheme == ULY_DECODE_DCP ? mq : nq, nk, nv, od, ld) == ULY_OK, "%s",
                      uly_last_error());
        uly_infer_volume(s, &dv, NULL, NULL);
        for (int w = 0; w < ULY_DEC_COUNT; w++) {
            ck_assert_uint_eq(dv.sent[w] - dv0.sent[w], plan_v.sent[w]);
            ck_assert_uint_eq(dv.recv[w] - dv0.recv[w], plan_v.recv[w]);
        }
        step_bytes[st] = vol_total(&dv) - vol_total(&dv0);
        ck_assert_int_eq(uly_infer_length(s), n);
        /* one process, the same layout and P: bitwise */
        take_rows(k, pk, B, N, Hkv * d, 0, n, es);
        take_rows(v, pv, B, N, Hkv * d, 0, n, es);
        uly_attn_desc e = a;
        e.seq = n;
        ck_assert_int_eq(uly_decode_emulate(&e, scheme, &L, pos, nq, pk, pv, oe, le, 2), ULY_OK);
        for (int64_t b = 0; b < B; b++) {
            ck_assert_mem_eq(od + (size_t)(b * hc * d) * es, oe + (size_t)((b * H + hb) * d) * es, (size_t)(hc * d) * es);
            ck_assert_mem_eq(ld + (size_t)(b * hc) * es, le + (size_t)(b * H + hb) * es, (size_t)hc * es);
        }
        /* the float64 reference: the last row of a causal problem of n tokens */
        take_rows((char *)pr.q, (char *)rq, B, N, H * d, 0, n, sizeof(double));
        take_rows((char *)pr.k, (char *)rk, B, N, Hkv * d, 0, n, sizeof(double));
        take_rows((char *)pr.v, (char *)rv, B, N, Hkv * d, 0, n, sizeof(double));
        ck_assert_int_eq(uly_ref_fwd(&e, rq, rk, rv, ro, rl), ULY_OK);
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < hc; h++) {
                memcpy(ref_o + (b * hc + h) * d, ro + ((b * n + pos) * H + hb + h) * d, (size_t)d * sizeof(double));
                ref_l[b * hc + h] = rl[(b * H + hb + h) * n + pos];
            }
        const double atol = t == ULY_F32 ? 3e-6 : 1e-11, rtol = t == ULY_F32 ? 3e-5 : 1e-9;
        char msg[512];
        ck_assert_msg(!tu_close(ref_o, od, t, (size_t)(B * hc * d), atol, rtol, msg, sizeof msg), "O: %s", msg);
        ck_assert_msg(!tu_close(ref_l, ld, t, (size_t)(B * hc), atol, rtol, msg, sizeof msg), "LSE: %s", msg);
    }
    /* the cache is full now */
    ck_assert_int_eq(uly_infer_decode(s, scheme == ULY_DECODE_DCP ? mq : nq, nk, nv, od, ld), ULY_ERANGE);
    uly_infer_free(s);
    free(q); free(k); free(v); free(lq); free(lk); free(lv); free(lo);
    free(nq); free(mq); free(nk); free(nv); free(od); free(ld); free(oe); free(le); free(pk); free(pv);
    free(ro); free(rl); free(rq); free(rk); free(rv); free(ref_o); free(ref_l);
    tu_problem_free(&pr);
}

#define STEPS 3

START_TEST(decode_bitwise_and_volumes)
{
    static const int methods[] = {ULY_METHOD_ULYSSES, ULY_METHOD_RING, ULY_METHOD_ZIGZAG, ULY_METHOD_ALLGATHER};
    static const int64_t blocks[] = {0, 2, 3}; /* contiguous, round-robin:2, round-robin:3 */
    int m = 0;
    for (int shape = 0; shape < 2; shape++)
        for (int scheme = 0; scheme < ULY_DECODE_COUNT; scheme++)
            for (int l = 0; l < 3; l++, m++) {
                const uly_attn_desc full = shape == 0 ? mkdesc(2, 40, 8, 2, 8, ULY_F32) : mkdesc(2, 40, 5, 1, 4, ULY_F64);
                uint64_t b1[STEPS], b2[STEPS];
                const int kind = blocks[l] ? ULY_KV_ROUND_ROBIN : ULY_KV_CONTIGUOUS;
                run_infer(&full, 13, STEPS, methods[m % 4], scheme, kind, blocks[l], b1);
                for (int st = 0; st < STEPS; st++) {
                    ck_assert_uint_eq(b1[st], b1[0]);
                    if (P > 1)
                        ck_assert_uint_gt(b1[st], 0);
                }
                if (shape || l != 2)
                    continue;
                /* two heads: on 3 and 4 ranks some rank holds none (dcp: it gathers the
                 * query without sending any; both: it merges nothing) */
                const uly_attn_desc two = mkdesc(1, 40, 2, 1, 8, ULY_F32);
                run_infer(&two, 7, STEPS, ULY_METHOD_RING, scheme, kind, blocks[l], b2);
                /* the per-step bytes do not depend on the sequence length */
                run_infer(&full, 29, STEPS, methods[(m + 1) % 4], scheme, kind, blocks[l], b2);
                for (int st = 0; st < STEPS; st++)
                    ck_assert_uint_eq(b1[st], b2[st]);
            }
}
END_TEST

START_TEST(bad_options_everywhere)
{
    uly_attn_desc a = mkdesc(1, 12, 4, 2, 4, ULY_F32);
    uly_infer_opts o;
    memset(&o, 0, sizeof o);
    o.prefill.method = ULY_METHOD_ULYSSES;
    o.scheme = ULY_DECODE_HELIX;
    o.kv_kind = ULY_KV_ROUND_ROBIN;
    o.kv_block = 4;
    o.capacity = 11; /* below the prompt */
    uly_infer *s = (uly_infer *)&o;
    ck_assert_int_eq(uly_infer_create(MPI_COMM_WORLD, &a, &o, &s), ULY_EINVAL);
    ck_assert_ptr_null(s);
    ck_assert_int_eq(uly_infer_memory(&a, &o, P, rank, &(uly_bufs){0}), ULY_EINVAL);
    o.capacity = 20;
    a.causal = 0;
    ck_assert_int_eq(uly_infer_create(MPI_COMM_WORLD, &a, &o, &s), ULY_EINVAL);
    a.causal = 1;
    const int64_t off[3] = {0, 5, 12};
    a.doc_offsets = off;
    a.docs = 2;
    ck_assert_int_eq(uly_infer_create(MPI_COMM_WORLD, &a, &o, &s), ULY_EINVAL);
    a.doc_offsets = NULL;
    a.docs = 0;
    o.kv_block = 0;
    ck_assert_int_eq(uly_infer_create(MPI_COMM_WORLD, &a, &o, &s), ULY_EINVAL);
    /* a rank with other options: every rank stops, none hangs */
    o.kv_block = 4;
    o.capacity = rank == P - 1 ? 21 : 20;
    int rc = uly_infer_create(MPI_COMM_WORLD, &a, &o, &s);
    if (P > 1)
        ck_assert_int_eq(rc, ULY_EMISMATCH);
    else
        ck_assert_int_eq(rc, ULY_OK);
    uly_infer_free(s);
    /* decode before the prefill */
    o.capacity = 20;
    ck_assert_int_eq(uly_infer_create(MPI_COMM_WORLD, &a, &o, &s), ULY_OK);
    float x[64] = {0};
    ck_assert_int_eq(uly_infer_decode(s, x, x, x, x, NULL), ULY_EINVAL);
    uly_infer_free(s);
}
END_TEST

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    Suite *su = suite_create("infer");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, decode_bitwise_and_volumes);
    tcase_add_test(tc, bad_options_everywhere);
    suite_add_tcase(su, tc);
    SRunner *sr = srunner_create(su);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, rank == 0 ? CK_NORMAL : CK_SILENT);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    int any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (failed)
        fprintf(stderr, "rank %d: %d failures\n", rank, failed);
    MPI_Finalize();
    return any ? EXIT_FAILURE : EXIT_SUCCESS;
}
