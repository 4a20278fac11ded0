/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_classes.c -- the class engine (one group per class of equivalent
 * groups, copies counted as link loads) against the full flow-level engine:
 * every number of a simulated iteration (times, bytes, memory, events) must
 * be the same bits, on many shapes -- every method, TP/PP/DP/ZeRO
 * compositions, shared NICs, oversubscribed spines, uneven divisions -- and
 * on single collectives; groups placed in several ways by one group per class
 * of alike groups.  Placements the class engine cannot represent (no two
 * groups alike) must fall back (auto) or be refused (classes).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "usim.h"
#include "usim_internal.h"

static usim_platform load_platform(const char *name)
{
    char path[1024];
    usim_platform p;
    ck_assert_int_eq(usim_preset_path("platforms", name, path, sizeof path), USIM_OK);
    ck_assert_msg(usim_platform_load(path, &p) == USIM_OK, "%s", usim_last_error());
    return p;
}

static usim_model load_model(const char *name)
{
    char path[1024];
    usim_model m;
    ck_assert_int_eq(usim_preset_path("models", name, path, sizeof path), USIM_OK);
    ck_assert_msg(usim_model_load(path, &m) == USIM_OK, "%s", usim_last_error());
    return m;
}

/* Same bits: compare doubles as doubles (== also fails on NaN). */
#define SAME(field) ck_assert_msg(a.field == b.field, "%s: %s: %.17g (full) vs %.17g (classes)", \
                                  what, #field, (double)a.field, (double)b.field)
/* Every field of two usim_coll_result a (full) and b (classes). */
#define SAME_RESULT() do { SAME(duration); SAME(max_sent[0]); SAME(max_sent[1]); SAME(total_sent); \
                           SAME(total_recv); SAME(extrapolated); SAME(algo); SAME(proto); SAME(channels); } while (0)

typedef struct shape {
    const char *platform;   /* preset, or "rails2" (2 NICs per 8 GPUs), "over4" (spine 4:1) */
    const char *model;
    int gpus, method, sp, tp, pp, dp, ulysses, zero;
    int64_t seq, layers;
    int fallback;           /* 1: the class engine cannot represent every collective */
} shape;

static usim_platform platform_of(const char *name)
{
    if (strcmp(name, "rails2") == 0) {
        usim_platform p = load_platform("dgx-h100");
        p.nics_per_node = 2;
        return p;
    }
    if (strcmp(name, "a2acall") == 0) {   /* a fixed cost per all-to-all call */
        usim_platform p = load_platform("dgx-a100-40g");
        p.a2a_call[USIM_CLASS_NVLINK] = 3000000;
        p.a2a_call[USIM_CLASS_NIC] = 20000000;
        return p;
    }
    if (strcmp(name, "mesh3") == 0) {   /* full-mesh nodes of an odd GPU count: rail-order rings */
        usim_platform p = load_platform("mi300x-8");
        p.gpus_per_node = 3;
        return p;
    }
    if (strcmp(name, "over4") == 0) {
        usim_platform p = load_platform("dgx-a100-40g");
        p.oversub = 4;
        return p;
    }
    return load_platform(name);
}

static int runs_classes;

static void check_shape(const shape *s)
{
    usim_platform p = platform_of(s->platform);
    usim_model m = load_model(s->model);
    if (s->seq)
        m.seq = s->seq;
    if (s->layers)
        m.layers = s->layers;
    usim_job j = {.method = (uly_method)s->method, .gpus = s->gpus, .sp = s->sp, .tp = s->tp, .pp = s->pp,
                  .dp = s->dp, .ulysses = s->ulysses, .zero = s->zero, .recompute = USIM_RC_FULL,
                  .a2a = USIM_A2A_DIRECT};
    char what[200];
    snprintf(what, sizeof what, "%s %s G=%d %s sp=%d tp=%d pp=%d dp=%d u=%d zero=%d seq=%lld",
             s->platform, s->model, s->gpus, uly_method_sim_name(s->method), s->sp, s->tp, s->pp,
             s->dp, s->ulysses, s->zero, (long long)m.seq);
    usim_result a, b;
    usim_sim *full = usim_sim_new(&p, s->gpus), *cls = usim_sim_new(&p, s->gpus);
    ck_assert(full && cls);
    usim_sim_set_engine(full, USIM_ENGINE_FULL);
    usim_sim_set_engine(cls, USIM_ENGINE_AUTO);
    ck_assert_msg(usim_simulate(full, &m, &j, NULL, &a) == USIM_OK, "%s: %s", what, usim_last_error());
    ck_assert_msg(usim_simulate(cls, &m, &j, NULL, &b) == USIM_OK, "%s: %s", what, usim_last_error());
    SAME(iter_s);
    SAME(compute_s);
    SAME(bubble_s);
    for (int k = 0; k < USIM_NKIND; k++) {
        SAME(exposed_s[k]);
        SAME(comm_s[k]);
    }
    for (int k = 0; k < USIM_NCLASS; k++)
        SAME(sent_bytes[k]);
    SAME(sp_bytes_layer_fwd);
    SAME(tflops);
    SAME(mfu);
    SAME(mem.total);
    SAME(mem.activations);
    SAME(fits);
    SAME(events);
    SAME(micro_steps);
    SAME(collectives_simulated);
    ck_assert_int_eq(a.coll_classes, 0);
    ck_assert(a.coll_full > 0);
    ck_assert_int_eq(a.coll_full, b.coll_full + b.coll_classes);
    if (s->fallback) {
        ck_assert_msg(b.coll_full > 0, "%s: expected a fallback", what);
    } else {
        ck_assert_msg(b.coll_full == 0 && b.coll_classes > 0,
                      "%s: %d collectives fell back to the full engine", what, b.coll_full);
        runs_classes++;
    }
    /* the per-GPU byte check: every GPU of a group counts what its class does */
    for (int g = 0; g < s->gpus; g += s->gpus - 1 > 0 ? s->gpus - 1 : 1) {   /* first and last */
        double fa[2], fb[2];
        ck_assert_int_eq(usim_sp_layer_bytes(full, &m, &j, g, fa), USIM_OK);
        ck_assert_int_eq(usim_sp_layer_bytes(cls, &m, &j, g, fb), USIM_OK);
        ck_assert_msg(fa[0] == fb[0] && fa[1] == fb[1], "%s: GPU %d layer bytes", what, g);
    }
    /* the groups' ranks and placement decoded from their grids everywhere (as groups of
     * more than 65536 GPUs are) instead of listed: the same bits */
    {
        usim_result c2;
        usim_sim *dec = usim_sim_new(&p, s->gpus);
        ck_assert(dec);
        int old = usim_test_grid_list_max(0);
        ck_assert_msg(usim_simulate(dec, &m, &j, NULL, &c2) == USIM_OK, "%s: %s", what, usim_last_error());
        usim_test_grid_list_max(old);
        ck_assert_msg(c2.iter_s == b.iter_s && c2.sent_bytes[0] == b.sent_bytes[0] &&
                      c2.sent_bytes[1] == b.sent_bytes[1] && c2.sp_bytes_layer_fwd == b.sp_bytes_layer_fwd &&
                      c2.exposed_s[USIM_KIND_PARAM] == b.exposed_s[USIM_KIND_PARAM] &&
                      c2.exposed_s[USIM_KIND_GRAD] == b.exposed_s[USIM_KIND_GRAD] && c2.events == b.events,
                      "%s: decoded grids differ", what);
        usim_sim_free(dec);
    }
    usim_sim_free(full);
    usim_sim_free(cls);
}

enum { UL = ULY_METHOD_ULYSSES, MS = ULY_METHOD_MEGATRON_SP, RI = ULY_METHOD_RING, ZZ = ULY_METHOD_ZIGZAG,
       US = ULY_METHOD_USP, AG = ULY_METHOD_ALLGATHER };

static const shape shapes[] = {
    /* every method, DP across nodes (ZeRO groups span nodes, SP groups in one) */
    {"dgx-a100-40g", "gpt-1.2b", 64, UL, 8, 0, 0, 0, 0, 3, 32768, 2, 0},
    {"dgx-a100-40g", "gpt-1.2b", 64, MS, 8, 0, 0, 0, 0, 3, 32768, 2, 0},
    {"dgx-a100-40g", "gpt-1.2b", 64, RI, 8, 0, 0, 0, 0, 3, 32768, 2, 0},
    {"dgx-a100-40g", "gpt-1.2b", 64, ZZ, 8, 0, 0, 0, 0, 3, 32768, 2, 0},
    {"dgx-a100-40g", "gpt-1.2b", 64, US, 8, 0, 0, 0, 2, 3, 32768, 2, 0},
    {"dgx-a100-40g", "gpt-1.2b", 64, AG, 8, 0, 0, 0, 0, 3, 32768, 2, 0},
    /* SP groups across nodes */
    {"dgx-a100-40g", "gpt-1.2b", 64, UL, 16, 0, 0, 0, 0, 3, 65536, 2, 0},
    {"dgx-a100-40g", "gpt-1.2b", 64, RI, 32, 0, 0, 0, 0, 1, 65536, 2, 0},
    {"dgx-a100-40g", "gpt-1.2b", 64, US, 32, 0, 0, 0, 4, 2, 65536, 2, 0},
    {"dgx-a100-40g", "gpt-1.2b", 64, AG, 16, 0, 0, 0, 0, 0, 65536, 2, 0},
    /* TP x SP x DP, PP */
    {"dgx-a100-40g", "gpt-1.2b", 64, UL, 8, 2, 0, 0, 0, 3, 32768, 2, 0},
    {"dgx-a100-40g", "gpt-1.2b", 64, US, 8, 2, 0, 0, 2, 1, 32768, 4, 0},
    {"dgx-a100-40g", "gpt-1.2b", 64, RI, 4, 2, 2, 0, 0, 2, 32768, 4, 0},
    {"dgx-a100-40g", "gpt-1.2b", 64, UL, 4, 4, 2, 0, 0, 3, 32768, 4, 0},
    {"dgx-a100-40g", "gpt-1.2b", 64, MS, 4, 0, 4, 0, 0, 0, 32768, 4, 0},
    /* oversubscribed spine, shared NICs (rails), PCIe platforms */
    {"over4", "gpt-1.2b", 64, UL, 16, 0, 0, 0, 0, 3, 65536, 2, 0},
    {"over4", "gpt-1.2b", 64, ZZ, 16, 2, 0, 0, 0, 3, 65536, 2, 0},
    {"dgx-h100-2to1", "gpt-1.2b", 64, US, 16, 0, 0, 0, 4, 3, 65536, 2, 0},
    {"rails2", "gpt-1.2b", 64, UL, 16, 0, 0, 0, 0, 3, 65536, 2, 0},
    {"a2acall", "gpt-1.2b", 64, UL, 16, 0, 0, 0, 0, 3, 65536, 2, 0},
    {"a2acall", "gpt-1.2b", 64, US, 8, 2, 0, 0, 4, 3, 65536, 2, 0},
    {"rails2", "gpt-1.2b", 64, MS, 8, 0, 2, 0, 0, 2, 65536, 2, 0},
    {"rails2", "gpt-1.2b", 64, AG, 4, 2, 0, 0, 0, 1, 65536, 2, 0},
    {"a100-pcie-4", "gpt-1.2b", 4, UL, 2, 0, 0, 0, 0, 3, 32768, 2, 0},
    {"l40s-pcie-8", "gpt-1.2b", 8, RI, 4, 0, 0, 0, 0, 3, 32768, 2, 0},
    {"dgx-a100-40g", "gpt-1.2b", 64, UL, 8, 0, 0, 0, 0, 3, 30001, 2, 0},
    {"dgx-a100-40g", "gpt-1.2b", 64, ZZ, 16, 0, 0, 0, 0, 3, 30016, 2, 0},
    /* full-mesh nodes (no NVSwitch), NVLink domains of 72 GPUs over 4-GPU nodes */
    {"mi300x-8", "gpt-1.2b", 64, UL, 8, 0, 0, 0, 0, 3, 32768, 2, 0},
    {"mi300x-8", "gpt-1.2b", 64, US, 16, 0, 0, 0, 4, 3, 32768, 2, 0},
    {"mi300x-8", "gpt-1.2b", 128, MS, 8, 0, 0, 0, 0, 2, 32768, 2, 0},
    {"gb200-nvl72", "gpt-1.2b", 144, UL, 8, 0, 0, 0, 0, 3, 32768, 2, 0},
    {"gb200-nvl72", "gpt-1.2b", 144, ZZ, 8, 2, 0, 0, 0, 3, 32768, 2, 0},   /* 16-GPU groups on 72: 2 classes */
    /* uneven: heads over the all-to-all, sequence over ranks (ulysses; zigzag methods need 2 x CP
     * equal chunks), GQA; groups of 12 and 24 on 8-GPU nodes: several classes of groups */
    {"dgx-a100-40g", "gpt-1.2b", 48, UL, 12, 0, 0, 0, 0, 3, 30000, 2, 0},
    {"dgx-a100-40g", "llama-3-8b", 48, US, 24, 0, 0, 0, 3, 3, 50016, 2, 0},
    {"dgx-a100-40g", "llama-3-8b", 48, ZZ, 12, 2, 0, 0, 0, 2, 49992, 2, 0},
    /* one ZeRO ring over 128 and 192 GPUs: its light cone */
    {"dgx-a100-40g", "gpt-1.2b", 128, UL, 8, 0, 0, 0, 0, 3, 32768, 2, 0},
    {"rails2", "gpt-1.2b", 128, MS, 8, 0, 0, 0, 0, 2, 30001, 2, 0},
    {"over4", "llama-3-8b", 192, US, 8, 0, 0, 0, 2, 3, 30000, 2, 0},
    {"dgx-a100-40g", "gpt-1.2b", 128, RI, 16, 0, 0, 0, 0, 0, 32768, 2, 0},
    /* uneven sequence shards (ring and megatron-sp accept any length; zigzag needs 2 x CP
     * equal chunks), alone and under TP, across nodes, with GQA */
    {"dgx-a100-40g", "gpt-1.2b", 64, RI, 16, 0, 0, 0, 0, 3, 30001, 2, 0},
    {"over4", "gpt-1.2b", 128, RI, 8, 2, 0, 0, 0, 3, 30003, 2, 0},
    {"rails2", "llama-3-8b", 64, RI, 32, 0, 0, 0, 0, 1, 49999, 2, 0},
    {"dgx-a100-40g", "gpt-1.2b", 64, MS, 16, 0, 0, 0, 0, 3, 30001, 2, 0},
    {"dgx-a100-40g", "gpt-1.2b", 128, UL, 8, 2, 0, 0, 0, 0, 30001, 2, 0},
    /* groups of 12 straddle 8-GPU nodes in two ways: two classes of groups (the full engine
     * ran them before there were several classes) */
    {"dgx-a100-40g", "gpt-1.2b", 48, RI, 12, 0, 0, 0, 0, 3, 36000, 2, 0},
};

START_TEST(test_iteration_equal)
{
    check_shape(&shapes[_i]);
}
END_TEST

/* Single collectives on many groups: every algorithm and protocol the tuner
 * may pick, result and per-GPU counters equal. */
START_TEST(test_collectives_equal)
{
    usim_platform plats[4] = {platform_of("dgx-a100-40g"), platform_of("rails2"), platform_of("over4"),
                              platform_of("mi300x-8")};
    const int G = 64;
    int ranks[64];
    uint64_t pb[16 * 16], ch[16];
    uint64_t sa[64], sb[64], ra[64], rb[64];
    for (int pi = 0; pi < 4; pi++)
        for (int t = 0; t < USIM_NCOLL; t++)
            for (int stride = 1; stride <= 8; stride *= 2) {
                int P = t == USIM_SENDRECV ? 2 : 16;
                if (t == USIM_ALLREDUCE && stride == 1)
                    P = 8;   /* one node: nvls / ring inside a node */
                if (stride * P > G)
                    continue;
                int NG = G / P;
                /* group gi position p: GPU p*stride + gi (mod blocks) */
                for (int gi = 0; gi < NG; gi++)
                    for (int p = 0; p < P; p++) {
                        int blk = stride * P, b0 = (gi / stride) * blk, off = gi % stride;
                        ranks[gi * P + p] = b0 + off + p * stride;
                    }
                for (int i = 0; i < P * P; i++)
                    pb[i] = (uint64_t)(1000003 * (i % 7 + 1)) + (uint64_t)i;
                for (int i = 0; i < P; i++)
                    ch[i] = 4000000 + (uint64_t)(i % 3);
                usim_coll c = {.type = (usim_coll_type)t, .ngroups = NG, .size = P, .ranks = ranks,
                               .pair_bytes = pb, .chunk_bytes = ch, .bytes = 3000000, .algo = USIM_ALGO_AUTO,
                               .proto = USIM_PROTO_AUTO, .grid = NULL, .chunk_total = 0, .chunk_mult = 0};
                usim_net *na = usim_net_new(&plats[pi], G), *nb = usim_net_new(&plats[pi], G);
                usim_coll_result a, b;
                usim_net_set_engine(na, USIM_ENGINE_FULL);
                usim_net_set_engine(nb, USIM_ENGINE_CLASSES);
                ck_assert_msg(usim_coll_run(na, &c, &a, sa, ra) == USIM_OK, "%s P=%d stride=%d: %s",
                              usim_coll_name(c.type), P, stride, usim_last_error());
                ck_assert_msg(usim_coll_run(nb, &c, &b, sb, rb) == USIM_OK, "%s", usim_last_error());
                const char *what = usim_coll_name(c.type);
                SAME_RESULT();
                ck_assert(b.classes && !a.classes);
                ck_assert(memcmp(sa, sb, sizeof sa) == 0 && memcmp(ra, rb, sizeof ra) == 0);
                usim_net_free(na);
                usim_net_free(nb);
            }
}
END_TEST

/* One ring over every GPU (the ZeRO / data-parallel group at TP = PP = 1):
 * reduced by its light cone.  Even chunks, chunks split unevenly (the first
 * r larger, as uly_split does), and irregular chunks; every ring type. */
START_TEST(test_single_ring_equal)
{
    usim_platform plats[5] = {platform_of("dgx-a100-40g"), platform_of("rails2"), platform_of("over4"),
                              platform_of("mi300x-8"), platform_of("mesh3")};
    static const int sizes[] = {96, 128};
    int ranks[256];
    uint64_t ch[256], sa[256], sb[256];
    for (int i = 0; i < 256; i++)
        ranks[i] = i;
    for (int pi = 0; pi < 5; pi++)
        for (int si = 0; si < 2 - (pi == 4); si++)   /* mesh3: 96 GPUs */
            for (int t = USIM_ALLGATHER; t <= USIM_ALLREDUCE; t++)
                for (int pat = 0; pat < 3; pat++) {
                    int P = sizes[si];
                    for (int i = 0; i < P; i++)
                        ch[i] = pat == 0 ? 3000000 : pat == 1 ? 3000000 + (i < 37 ? 2 : 0)
                                                              : 3000000 + (uint64_t)((i * 7919) % 5) * 1000;
                    usim_coll c = {.type = (usim_coll_type)t, .ngroups = 1, .size = P, .ranks = ranks,
                                   .pair_bytes = NULL, .chunk_bytes = ch, .bytes = 0, .algo = USIM_ALGO_RING,
                                   .proto = USIM_PROTO_SIMPLE, .grid = NULL, .chunk_total = 0,
                                   .chunk_mult = 0};
                    usim_net *na = usim_net_new(&plats[pi], P), *nb = usim_net_new(&plats[pi], P);
                    usim_net_set_engine(na, USIM_ENGINE_FULL);
                    usim_coll_result a, b, cnt;
                    ck_assert_int_eq(usim_coll_run(na, &c, &a, sa, NULL), USIM_OK);
                    uint64_t ev_full = usim_net_last_events(na);
                    ck_assert_int_eq(usim_coll_run(nb, &c, &b, sb, NULL), USIM_OK);
                    uint64_t ev_cls = usim_net_last_events(nb);
                    char what[96];
                    snprintf(what, sizeof what, "%s P=%d pattern %d platform %d", usim_coll_name(c.type),
                             P, pat, pi);
                    SAME(duration);
                    SAME(max_sent[0]);
                    SAME(max_sent[1]);
                    SAME(total_sent);
                    SAME(extrapolated);
                    ck_assert_msg(memcmp(sa, sb, (size_t)P * sizeof *sa) == 0, "%s: counters", what);
                    /* the closed-form counters: every chunk crosses P - 1 links per pass */
                    ck_assert_int_eq(usim_coll_count(nb, &c, &cnt, NULL, NULL), USIM_OK);
                    uint64_t sum = 0;
                    for (int i = 0; i < P; i++)
                        sum += ch[i];
                    uint64_t want = (uint64_t)(t == USIM_ALLREDUCE ? 2 : 1) * (uint64_t)(P - 1) * sum;
                    ck_assert(cnt.total_sent == want && a.total_sent == want && a.total_recv == want);
                    ck_assert(cnt.max_sent[0] == a.max_sent[0] && cnt.max_sent[1] == a.max_sent[1]);
                    /* and it was reduced: fewer events than the whole ring */
                    if (pat == 0)
                        ck_assert_msg(ev_cls < ev_full, "%s: %llu events vs %llu", what,
                                      (unsigned long long)ev_cls, (unsigned long long)ev_full);
                    usim_net_free(na);
                    usim_net_free(nb);
                }
}
END_TEST

/* Two interleaved groups (TP 2 around a data-parallel ring): group 0 by
 * its light cone, the other group's copies as loads on the shared NICs and
 * spine links (fewer events than half the whole: the cone, not only the
 * group reduction, applied). */
START_TEST(test_interleaved_rings_equal)
{
    usim_platform plats[3] = {platform_of("dgx-a100-40g"), platform_of("rails2"), platform_of("over4")};
    int ranks[256];
    uint64_t ch[128], sa[256], sb[256];
    for (int gi = 0; gi < 2; gi++)
        for (int p = 0; p < 128; p++)
            ranks[gi * 128 + p] = gi + 2 * p;
    for (int pi = 0; pi < 3; pi++)
        for (int t = USIM_ALLGATHER; t <= USIM_ALLREDUCE; t++)
            for (int pat = 0; pat < 2; pat++) {
                for (int i = 0; i < 128; i++)
                    ch[i] = 2000000 + (pat && i < 37 ? 2 : 0);
                usim_coll c = {.type = (usim_coll_type)t, .ngroups = 2, .size = 128, .ranks = ranks,
                               .pair_bytes = NULL, .chunk_bytes = ch, .bytes = 0, .algo = USIM_ALGO_RING,
                               .proto = USIM_PROTO_SIMPLE, .grid = NULL, .chunk_total = 0, .chunk_mult = 0};
                usim_net *na = usim_net_new(&plats[pi], 256), *nb = usim_net_new(&plats[pi], 256);
                usim_net_set_engine(na, USIM_ENGINE_FULL);
                usim_coll_result a, b;
                ck_assert_int_eq(usim_coll_run(na, &c, &a, sa, NULL), USIM_OK);
                uint64_t ev_full = usim_net_last_events(na);
                ck_assert_int_eq(usim_coll_run(nb, &c, &b, sb, NULL), USIM_OK);
                uint64_t ev_cls = usim_net_last_events(nb);
                char what[96];
                snprintf(what, sizeof what, "%s interleaved pattern %d platform %d",
                         usim_coll_name(c.type), pat, pi);
                SAME(duration);
                SAME(max_sent[0]);
                SAME(max_sent[1]);
                SAME(total_sent);
                ck_assert_msg(memcmp(sa, sb, sizeof sa) == 0, "%s: counters", what);
                if (pat == 0)
                    ck_assert_msg(ev_cls * 3 < ev_full, "%s: %llu events vs %llu", what,
                                  (unsigned long long)ev_cls, (unsigned long long)ev_full);
                usim_net_free(na);
                usim_net_free(nb);
            }
}
END_TEST

/* Groups given by strides (usim_grid, as the simulator places a job's groups)
 * against the same groups listed and run by the full engine: every collective
 * type, grids whose unit sizes cut a digit (refined), transposed grids, chunks
 * given by their split (uneven) or listed; result, per-GPU counters and the
 * one-GPU count equal. */
START_TEST(test_grid_equal)
{
    usim_platform plats[3] = {platform_of("rails2"), platform_of("over4"), platform_of("mi300x-8")};
    const int G = 64;
    /* (position digits..., group digits...): least significant first (one group of every
     * GPU: test_single_ring_equal) */
    static const struct { int P, nd; int n[4], s[4]; } grids[] = {
        {16, 2, {16, 4}, {1, 16}},          /* consecutive 16: two nodes each */
        {16, 2, {16, 4}, {4, 1}},           /* stride 4, groups interleaved */
        {16, 3, {4, 4, 4}, {1, 16, 4}},     /* positions split over two digits */
        {8, 3, {2, 4, 8}, {1, 16, 2}},      /* 2 x 4 positions, one per NIC pair */
        {32, 2, {32, 2}, {2, 1}},           /* two interleaved rings over every node */
    };
    int ranks[64];
    uint64_t pb[64 * 64], ch[64];
    uint64_t sa[64], sb[64], ra[64], rb[64];
    /* small groups have their ranks listed from the grid; 0: decoded everywhere, as
     * large groups are */
    int list_max = usim_test_grid_list_max(65536);
    for (int lm = 0; lm < 2; lm++)
    for (int pi = 0; pi < 3; pi++)
        for (size_t gi = 0; gi < sizeof grids / sizeof grids[0]; gi++)
            for (int t = 0; t < USIM_NCOLL; t++)
                for (int split = 0; split < 2; split++) {
                    int P = grids[gi].P, NG = G / P;
                    if (t == USIM_SENDRECV || (split && !(t >= USIM_ALLGATHER && t <= USIM_ALLREDUCE)))
                        continue;
                    if (P > 16 && !(t >= USIM_ALLGATHER && t <= USIM_ALLREDUCE))
                        continue;
                    usim_test_grid_list_max(lm ? 65536 : 0);
                    usim_grid gr = {.ndim = grids[gi].nd, .dim = {{.n = 0, .stride = 0}}};
                    for (int d = 0; d < grids[gi].nd; d++) {
                        gr.dim[d].n = grids[gi].n[d];
                        gr.dim[d].stride = grids[gi].s[d];
                    }
                    for (int i = 0; i < NG * P; i++) {
                        int x = i, h = 0;
                        for (int d = 0; d < gr.ndim; d++) {
                            h += x % gr.dim[d].n * gr.dim[d].stride;
                            x /= gr.dim[d].n;
                        }
                        ranks[i] = h;
                    }
                    for (int i = 0; i < P * P; i++)
                        pb[i] = (uint64_t)(1000003 * (i % 7 + 1)) + (uint64_t)i;
                    int64_t total = 3000037;   /* split: the first 37 % P positions one larger */
                    for (int i = 0; i < P; i++)
                        ch[i] = split ? (uint64_t)(total / P + (i < total % P)) * 2 : 4000000 + (uint64_t)(i % 3);
                    usim_coll la = {.type = (usim_coll_type)t, .ngroups = NG, .size = P, .ranks = ranks,
                                    .pair_bytes = pb, .chunk_bytes = ch, .bytes = 3000000};
                    usim_coll lb = {.type = (usim_coll_type)t, .ngroups = NG, .size = P, .grid = &gr,
                                    .pair_bytes = pb, .chunk_bytes = split ? NULL : ch, .chunk_total = total,
                                    .chunk_mult = 2, .bytes = 3000000};
                    usim_net *na = usim_net_new(&plats[pi], G), *nb = usim_net_new(&plats[pi], G);
                    usim_coll_result a, b;
                    usim_net_set_engine(na, USIM_ENGINE_FULL);
                    usim_net_set_ring_window(na, 16);   /* extrapolated rings, and a quicker test */
                    usim_net_set_ring_window(nb, 16);
                    char what[96];
                    snprintf(what, sizeof what, "%s grid %zu split %d platform %d", usim_coll_name(la.type), gi,
                             split, pi);
                    ck_assert_msg(usim_coll_run(na, &la, &a, sa, ra) == USIM_OK, "%s: %s", what, usim_last_error());
                    ck_assert_msg(usim_coll_run(nb, &lb, &b, sb, rb) == USIM_OK, "%s: %s", what, usim_last_error());
                    SAME_RESULT();
                    ck_assert_msg(b.classes && !a.classes, "%s: classes %d", what, b.classes);
                    ck_assert_msg(memcmp(sa, sb, sizeof sa) == 0 && memcmp(ra, rb, sizeof ra) == 0,
                                  "%s: per-GPU counters", what);
                    lb.algo = b.algo;   /* count the pattern that ran (as usim_sp_layer_bytes does) */
                    lb.proto = b.proto;
                    for (int h = 0; h < G; h += 7) {
                        uint64_t one;
                        usim_coll_result cr;
                        ck_assert_int_eq(usim_coll_count_gpu(nb, &lb, h, &cr, &one), USIM_OK);
                        ck_assert_msg(one == sa[h], "%s: GPU %d counts %llu, full %llu", what, h,
                                      (unsigned long long)one, (unsigned long long)sa[h]);
                    }
                    usim_net_free(na);
                    usim_net_free(nb);
                    usim_test_grid_list_max(lm ? 65536 : 0);
                }
    usim_test_grid_list_max(list_max);
}
END_TEST

/* A grid whose groups straddle nodes in two ways (12 on 8-GPU nodes) is
 * listed and found not alike: auto runs it at full flow level, classes
 * refuses it. */
START_TEST(test_grid_fallback)
{
    usim_platform p = platform_of("dgx-a100-40g");
    usim_grid gr = {.ndim = 2, .dim = {{.n = 12, .stride = 1}, {.n = 2, .stride = 12}}};
    usim_coll c = {.type = USIM_ALLGATHER, .ngroups = 2, .size = 12, .grid = &gr, .chunk_total = 12 << 20,
                   .chunk_mult = 1};
    usim_net *n = usim_net_new(&p, 24), *f = usim_net_new(&p, 24);
    usim_coll_result a, b;
    usim_net_set_engine(f, USIM_ENGINE_FULL);
    ck_assert_int_eq(usim_coll_run(n, &c, &a, NULL, NULL), USIM_OK);
    ck_assert_int_eq(usim_coll_run(f, &c, &b, NULL, NULL), USIM_OK);
    ck_assert(!a.classes && !b.classes);
    ck_assert_int_eq(a.duration, b.duration);
    usim_net_set_engine(n, USIM_ENGINE_CLASSES);
    ck_assert_int_eq(usim_coll_run(n, &c, &a, NULL, NULL), USIM_EINVAL);
    ck_assert_ptr_nonnull(strstr(usim_last_error(), "not placed alike"));
    /* a grid that does not describe the groups is refused */
    usim_grid bad = {.ndim = 1, .dim = {{.n = 12, .stride = 1}}};
    c.grid = &bad;
    usim_net_set_engine(n, USIM_ENGINE_AUTO);
    ck_assert_int_eq(usim_coll_run(n, &c, &a, NULL, NULL), USIM_EINVAL);
    usim_net_free(n);
    usim_net_free(f);
}
END_TEST

/* Asymmetric placements: auto falls back, classes is refused. */
START_TEST(test_fallback)
{
    usim_platform p = platform_of("dgx-a100-40g");
    int ranks[24];
    for (int i = 0; i < 24; i++)
        ranks[i] = i;   /* groups of 12 on 8-GPU nodes: 8 + 4 and 4 + 8 */
    uint64_t ch[12];
    for (int i = 0; i < 12; i++)
        ch[i] = 1 << 20;
    usim_coll c = {.type = USIM_ALLGATHER, .ngroups = 2, .size = 12, .ranks = ranks, .pair_bytes = NULL,
                   .chunk_bytes = ch, .bytes = 0, .algo = USIM_ALGO_AUTO, .proto = USIM_PROTO_AUTO,
                   .grid = NULL, .chunk_total = 0, .chunk_mult = 0};
    usim_net *n = usim_net_new(&p, 24), *f = usim_net_new(&p, 24);
    usim_coll_result a, b;
    usim_net_set_engine(f, USIM_ENGINE_FULL);
    ck_assert_int_eq(usim_coll_run(n, &c, &a, NULL, NULL), USIM_OK);
    ck_assert_int_eq(usim_coll_run(f, &c, &b, NULL, NULL), USIM_OK);
    ck_assert(!a.classes);
    ck_assert_int_eq(a.duration, b.duration);
    usim_net_set_engine(n, USIM_ENGINE_CLASSES);
    ck_assert_int_eq(usim_coll_run(n, &c, &a, NULL, NULL), USIM_EINVAL);
    ck_assert_ptr_nonnull(strstr(usim_last_error(), "not placed alike"));
    usim_net_free(n);
    usim_net_free(f);
}
END_TEST

START_TEST(test_pairwise_equal)
{
    shape s = {"over4", "gpt-1.2b", 64, UL, 16, 0, 0, 0, 0, 3, 65536, 2, 0};
    /* the pairwise all-to-all: steps with priorities */
    usim_platform p = platform_of(s.platform);
    usim_model m = load_model(s.model);
    m.seq = s.seq;
    m.layers = s.layers;
    usim_job j = {.method = ULY_METHOD_ULYSSES, .gpus = 64, .sp = 16, .tp = 0, .pp = 0, .dp = 0, .ulysses = 0,
                  .zero = 3, .recompute = USIM_RC_FULL, .a2a = USIM_A2A_PAIRWISE};
    usim_sim *full = usim_sim_new(&p, 64), *cls = usim_sim_new(&p, 64);
    usim_sim_set_engine(full, USIM_ENGINE_FULL);
    usim_result a, b;
    ck_assert_int_eq(usim_simulate(full, &m, &j, NULL, &a), USIM_OK);
    ck_assert_int_eq(usim_simulate(cls, &m, &j, NULL, &b), USIM_OK);
    const char *what = "pairwise";
    SAME(iter_s);
    SAME(exposed_s[USIM_KIND_SP]);
    SAME(sent_bytes[USIM_CLASS_NIC]);
    ck_assert_int_eq(b.coll_full, 0);
    usim_sim_free(full);
    usim_sim_free(cls);
}
END_TEST

/* One ring over 512 GPUs given by a grid, chunks split unevenly (the first
 * chunk_total % 512 positions one element larger): the light cone finds
 * its classes from runs of block sizes (binary searches on the grid), with
 * the size change inside a block, on a block boundary, near the wrap, or
 * none; positions in GPU order, and transposed (position digits across the
 * NVLink domains: every block holds positions 64 apart, and many blocks
 * hold both sizes).  Against the same ring listed, at full flow level, and
 * reduced (fewer events) where the classes are few. */
START_TEST(test_cone_runs_equal)
{
    usim_platform plats[2] = {platform_of("dgx-a100-40g"), platform_of("rails2")};
    static const struct { int nd; int n[2], s[2]; } grids[] = {
        {1, {512, 1}, {1, 0}},
        {2, {8, 64}, {64, 1}},
    };
    static const int64_t rem[] = {0, 1, 7, 8, 200, 511};
    static int ranks[512];
    static uint64_t ch[512], sa[512], sb[512];
    const int P = 512;
    for (int pi = 0; pi < 2; pi++)
        for (size_t gi = 0; gi < sizeof grids / sizeof grids[0]; gi++)
            for (size_t ri = 0; ri < sizeof rem / sizeof rem[0]; ri++)
                for (int t = USIM_ALLGATHER; t <= USIM_ALLREDUCE; t++) {
                    usim_grid gr = {.ndim = grids[gi].nd, .dim = {{.n = 0, .stride = 0}}};
                    for (int d = 0; d < gr.ndim; d++) {
                        gr.dim[d].n = grids[gi].n[d];
                        gr.dim[d].stride = grids[gi].s[d];
                    }
                    for (int i = 0; i < P; i++)
                        ranks[i] = usim_coll_rank(&(usim_coll){.size = P, .ngroups = 1, .grid = &gr}, 0, i);
                    int64_t total = (int64_t)P * 1000 + rem[ri];
                    for (int i = 0; i < P; i++)
                        ch[i] = (uint64_t)(total / P + (i < total % P)) * 2;
                    usim_coll la = {.type = (usim_coll_type)t, .ngroups = 1, .size = P, .ranks = ranks,
                                    .chunk_bytes = ch, .algo = USIM_ALGO_RING, .proto = USIM_PROTO_SIMPLE};
                    usim_coll lb = {.type = (usim_coll_type)t, .ngroups = 1, .size = P, .grid = &gr,
                                    .chunk_total = total, .chunk_mult = 2, .algo = USIM_ALGO_RING,
                                    .proto = USIM_PROTO_SIMPLE};
                    usim_net *na = usim_net_new(&plats[pi], P), *nb = usim_net_new(&plats[pi], P);
                    usim_coll_result a, b;
                    usim_net_set_engine(na, USIM_ENGINE_FULL);
                    usim_net_set_ring_window(na, 32);   /* 4 steps: 5-block windows */
                    usim_net_set_ring_window(nb, 32);
                    char what[96];
                    snprintf(what, sizeof what, "%s grid %zu remainder %lld platform %d",
                             usim_coll_name(la.type), gi, (long long)rem[ri], pi);
                    ck_assert_msg(usim_coll_run(na, &la, &a, sa, NULL) == USIM_OK, "%s: %s", what, usim_last_error());
                    uint64_t ev_full = usim_net_last_events(na);
                    ck_assert_msg(usim_coll_run(nb, &lb, &b, sb, NULL) == USIM_OK, "%s: %s", what, usim_last_error());
                    uint64_t ev_cls = usim_net_last_events(nb);
                    SAME_RESULT();
                    ck_assert_msg(memcmp(sa, sb, sizeof sa) == 0, "%s: per-GPU counters", what);
                    if (gi == 0 || rem[ri] == 0)   /* transposed and split: too many classes to reduce */
                        ck_assert_msg(ev_cls < ev_full / 2, "%s: %llu events vs %llu", what,
                                      (unsigned long long)ev_cls, (unsigned long long)ev_full);
                    usim_net_free(na);
                    usim_net_free(nb);
                }
}
END_TEST

/* The candidate search skips a protocol whose lower bound (busiest link's
 * bytes, or the ring's steps times its smallest route latency) reaches the
 * best time so far: the choice must be the one of trying every protocol.
 * Candidates are tried in the order of their bounds, not of the estimates:
 * the choice (ties to the smaller estimate) must be the one of trying every
 * protocol.  Single rings of 256 to 16384 GPUs (grids, chunks split
 * unevenly; 256 also listed), small chunks (latency-bound: the latency
 * bound prunes) and large ones; every explicit protocol's duration is at
 * least its bound. */
START_TEST(test_search_pruning)
{
    usim_platform plats[3] = {platform_of("dgx-a100-40g"), platform_of("rails2"), platform_of("mi300x-8")};
    static const usim_proto protos[3] = {USIM_PROTO_LL, USIM_PROTO_LL128, USIM_PROTO_SIMPLE};
    static int ranks[256];
    int pruned = 0;
    for (int i = 0; i < 256; i++)
        ranks[i] = i;
    for (int pi = 0; pi < 3; pi++)
        for (int P = 256; P <= 16384; P *= 4)
            for (int big = 0; big < 2; big++)
                for (int t = USIM_ALLGATHER; t <= USIM_ALLREDUCE; t++) {
                    usim_grid gr = {.ndim = 1, .dim = {{.n = P, .stride = 1}}};
                    usim_coll c = {.type = (usim_coll_type)t, .ngroups = 1, .size = P,
                                   .ranks = P == 256 && big ? ranks : NULL, .grid = &gr,
                                   .chunk_total = big ? 50000037 : (int64_t)P * 3 + 5, .chunk_mult = 2,
                                   .algo = USIM_ALGO_RING, .proto = USIM_PROTO_AUTO};
                    usim_net *n = usim_net_new(&plats[pi], P);
                    usim_coll_result r, e[3];
                    char what[96];
                    snprintf(what, sizeof what, "%s P=%d big %d platform %d", usim_coll_name(c.type), P, big, pi);
                    ck_assert_msg(usim_coll_run(n, &c, &r, NULL, NULL) == USIM_OK, "%s: %s", what,
                                  usim_last_error());
                    usim_time best = -1;
                    for (int k = 0; k < 3; k++) {
                        c.proto = protos[k];
                        ck_assert_msg(usim_coll_run(n, &c, &e[k], NULL, NULL) == USIM_OK, "%s: %s", what,
                                      usim_last_error());
                        usim_time lb = usim_test_ring_latency_bound(n, &c, protos[k]);
                        ck_assert_msg(e[k].duration >= lb, "%s proto %d: %lld ps below its bound %lld", what,
                                      (int)protos[k], (long long)e[k].duration, (long long)lb);
                        pruned += lb > r.duration;
                        if (best < 0 || e[k].duration < best)
                            best = e[k].duration;
                        if (e[k].proto == r.proto)
                            ck_assert_msg(e[k].duration == r.duration && e[k].estimate_s == r.estimate_s,
                                          "%s: the choice's time", what);
                    }
                    /* ties: the protocol with the smaller estimate */
                    for (int k = 0; k < 3; k++)
                        if (e[k].duration == best && e[k].proto != r.proto)
                            ck_assert_msg(e[k].estimate_s >= r.estimate_s, "%s: tie to the larger estimate", what);
                    ck_assert_msg(r.duration == best, "%s: chose %lld ps, best %lld", what,
                                  (long long)r.duration, (long long)best);
                    usim_net_free(n);
                }
    ck_assert_msg(pruned > 0, "no case exercised the latency bound");
}
END_TEST

/* Groups placed in several ways (groups of 12 or 6 on 8-GPU nodes, of 16 or
 * 32 on 72-GPU NVLink domains, half nodes paired across nodes, idle GPUs):
 * one group per class of alike groups, with the loads of every class on the
 * shared NICs, nodes and spines.  Every collective type (all-reduce also
 * forced to the ring and the tree) against the full engine: result, per-GPU
 * counters, the count path, one GPU's bytes, the cached analysis. */
typedef struct mcase {
    const char *platform;
    int gpus, P, NG, layout;   /* 0: consecutive from GPU 0; 1: half nodes paired (P = 8);
                                * 64: consecutive from GPU 64 (group 0 across two NVLink domains) */
    int nclasses;              /* the classes expected for groups of P */
} mcase;

static void mc_ranks(const mcase *m, int *ranks)
{
    if (m->layout != 1) {
        for (int i = 0; i < m->NG * m->P; i++)
            ranks[i] = m->layout + i;
        return;
    }
    /* four 8-GPU nodes: (n0 lo, n1 lo), (n0 hi, n2 lo), (n1 hi, n3 lo), (n2 hi, n3 hi) */
    static const int halves[4][2] = {{0, 8}, {4, 16}, {12, 24}, {20, 28}};
    for (int g = 0; g < 4; g++)
        for (int p = 0; p < 8; p++)
            ranks[g * 8 + p] = halves[g][p / 4] + p % 4;
}

START_TEST(test_multiclass_equal)
{
    static const mcase cases[] = {
        {"dgx-a100-40g", 48, 12, 4, 0, 2},
        {"dgx-a100-40g", 52, 12, 4, 0, 2},    /* GPUs 48-51 (half a node) in no group */
        {"rails2", 96, 12, 8, 0, 2},
        {"over4", 96, 12, 8, 0, 2},
        {"a2acall", 48, 12, 4, 0, 2},
        {"mi300x-8", 48, 12, 4, 0, 2},
        {"gb200-nvl72", 288, 16, 13, 64, 2},
        {"gb200-nvl72", 288, 16, 18, 0, 2},   /* group 0 in one domain: NVLS left out */
        {"rails2", 96, 6, 16, 0, 4},          /* likewise in one node */
        {"gb200-nvl72", 288, 32, 7, 64, 4},
        {"over4", 32, 8, 4, 1, 2},
        {"rails2", 32, 8, 4, 1, 2},
    };
    static int ranks[288], pairs[288];
    static uint64_t pb[32 * 32], ch[32];
    static uint64_t sa[288], sb[288], ra[288], rb[288];
    int runs = 0;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const mcase *m = &cases[ci];
        usim_platform p = platform_of(m->platform);
        int P = m->P, NG = m->NG, G = m->gpus;
        mc_ranks(m, ranks);
        for (int g = 0; g < NG; g++)   /* send/recv: the first two positions of each group */
            for (int q = 0; q < 2; q++)
                pairs[g * 2 + q] = ranks[g * P + q];
        for (int i = 0; i < P * P; i++)
            pb[i] = (uint64_t)(700001 * (i % 5 + 1)) + (uint64_t)i;
        for (int i = 0; i < P; i++)
            ch[i] = 3000000 + (uint64_t)(i % 3);
        for (int t = 0; t < USIM_NCOLL; t++)
            for (int algo = USIM_ALGO_AUTO; algo <= USIM_ALGO_TREE; algo++) {
                if (algo != USIM_ALGO_AUTO && t != USIM_ALLREDUCE)
                    continue;
                if (algo == USIM_ALGO_TREE && m->layout == 0)
                    continue;   /* not even group 0 can run the tree (refused by the tuner) */
                int sr = t == USIM_SENDRECV;
                usim_coll c = {.type = (usim_coll_type)t, .ngroups = NG, .size = sr ? 2 : P,
                               .ranks = sr ? pairs : ranks, .pair_bytes = pb, .chunk_bytes = ch,
                               .bytes = 5000000, .algo = (usim_algo)algo, .proto = USIM_PROTO_AUTO,
                               .grid = NULL, .chunk_total = 0, .chunk_mult = 0};
                char what[160];
                snprintf(what, sizeof what, "%s G=%d P=%d layout %d: %s algo %d", m->platform, G, c.size,
                         m->layout, usim_coll_name(c.type), algo);
                usim_net *na = usim_net_new(&p, G), *nb = usim_net_new(&p, G);
                ck_assert(na && nb);
                usim_coll_result a, b, b2;
                usim_net_set_engine(na, USIM_ENGINE_FULL);
                usim_net_set_engine(nb, USIM_ENGINE_CLASSES);
                int rca = usim_coll_run(na, &c, &a, sa, ra);
                if (rca != USIM_OK) {
                    /* a forced tree that some group's placement cannot run (every group needs
                     * >= 2 domains holding equally many of its GPUs) is refused by both engines;
                     * the automatic choice leaves it out (and NVLS when not every group is in
                     * one domain) */
                    ck_assert_msg(algo == USIM_ALGO_TREE, "%s: %s", what, usim_last_error());
                    ck_assert_msg(strstr(usim_last_error(), "placed differently") != NULL ||
                                  strstr(usim_last_error(), "does not apply") != NULL, "%s: %s", what,
                                  usim_last_error());
                    ck_assert_int_eq(usim_coll_run(nb, &c, &b, sb, rb), rca);
                    usim_net_free(na);
                    usim_net_free(nb);
                    continue;
                }
                ck_assert_msg(usim_coll_run(nb, &c, &b, sb, rb) == USIM_OK, "%s: %s", what, usim_last_error());
                SAME_RESULT();
                ck_assert_msg(memcmp(sa, sb, (size_t)G * sizeof *sa) == 0 &&
                              memcmp(ra, rb, (size_t)G * sizeof *ra) == 0, "%s: per-GPU counters", what);
                ck_assert_int_eq(a.classes, 0);
                if (!sr)
                    ck_assert_msg(b.classes == m->nclasses, "%s: %d classes", what, b.classes);
                /* the analysis kept on the network: the same again */
                ck_assert_int_eq(usim_coll_run(nb, &c, &b2, NULL, NULL), USIM_OK);
                ck_assert_msg(b2.duration == b.duration && b2.classes == b.classes, "%s: cached", what);
                /* counting only: totals, maxima and one GPU's bytes */
                ck_assert_int_eq(usim_coll_count(na, &c, &a, NULL, NULL), USIM_OK);
                ck_assert_int_eq(usim_coll_count(nb, &c, &b, NULL, NULL), USIM_OK);
                ck_assert_msg(a.total_sent == b.total_sent && a.total_recv == b.total_recv &&
                              a.max_sent[0] == b.max_sent[0] && a.max_sent[1] == b.max_sent[1],
                              "%s: counts", what);
                int hs[4] = {0, 5, G / 2 + 1, G - 1};
                for (int hi = 0; hi < 4; hi++) {
                    int h = hs[hi];
                    uint64_t oa, ob;
                    ck_assert_int_eq(usim_coll_count_gpu(na, &c, h, &a, &oa), USIM_OK);
                    ck_assert_int_eq(usim_coll_count_gpu(nb, &c, h, &b, &ob), USIM_OK);
                    ck_assert_msg(oa == ob && oa == sa[h], "%s: GPU %d bytes %llu vs %llu", what, h,
                                  (unsigned long long)oa, (unsigned long long)ob);
                }
                runs++;
                usim_net_free(na);
                usim_net_free(nb);
            }
    }
    ck_assert_int_ge(runs, 70);
}
END_TEST

/* One ring over a group placed unevenly on its NVLink domains (a partial last
 * node or domain: 300 GPUs on 8-GPU nodes, 400 on 72-GPU domains): one
 * channel in position order, reduced by its light cone with one position per
 * block and classes by windows of (chunk, route) values.  Even chunks, the
 * first 37 larger, irregular chunks, and a permuted order (no reduction);
 * every ring type, against the full engine, with a window of 16 steps. */
START_TEST(test_uneven_ring_equal)
{
    static const char *plats[] = {"dgx-a100-40g", "rails2", "over4", "mi300x-8", "mesh3", "gb200-nvl72"};
    static const int sizes[] = {300, 300, 300, 300, 301, 400};
    static int ranks[400];
    static uint64_t ch[400], sa[400], sb[400];
    for (int pi = 0; pi < 6; pi++)
        for (int t = USIM_ALLGATHER; t <= USIM_ALLREDUCE; t++)
            for (int pat = 0; pat < 4; pat++) {
                usim_platform pl = platform_of(plats[pi]);
                int P = sizes[pi];
                for (int i = 0; i < P; i++) {
                    ranks[i] = pat == 3 ? (int)(((int64_t)i * 7) % P) : i;
                    ch[i] = pat == 0 || pat == 3 ? 3000000 : pat == 1 ? 3000000 + (i < 37 ? 2 : 0)
                                                 : 3000000 + (uint64_t)((i * 7919) % 5) * 1000;
                }
                usim_coll c = {.type = (usim_coll_type)t, .ngroups = 1, .size = P, .ranks = ranks,
                               .pair_bytes = NULL, .chunk_bytes = ch, .bytes = 0, .algo = USIM_ALGO_RING,
                               .proto = USIM_PROTO_SIMPLE, .grid = NULL, .chunk_total = 0, .chunk_mult = 0};
                usim_net *na = usim_net_new(&pl, P), *nb = usim_net_new(&pl, P);
                ck_assert(na && nb);
                usim_net_set_ring_window(na, 16);
                usim_net_set_ring_window(nb, 16);
                usim_net_set_engine(na, USIM_ENGINE_FULL);
                usim_coll_result a, b;
                char what[96];
                snprintf(what, sizeof what, "%s P=%d pattern %d on %s", usim_coll_name(c.type), P, pat,
                         plats[pi]);
                ck_assert_msg(usim_coll_run(na, &c, &a, sa, NULL) == USIM_OK, "%s: %s", what, usim_last_error());
                uint64_t ev_full = usim_net_last_events(na);
                ck_assert_msg(usim_coll_run(nb, &c, &b, sb, NULL) == USIM_OK, "%s: %s", what, usim_last_error());
                uint64_t ev_cls = usim_net_last_events(nb);
                SAME_RESULT();
                ck_assert_msg(a.extrapolated > 0, "%s: not a long ring", what);
                ck_assert_msg(memcmp(sa, sb, (size_t)P * sizeof *sa) == 0, "%s: counters", what);
                if (pat <= 1)   /* reduced: fewer events than the whole window */
                    ck_assert_msg(ev_cls * 2 < ev_full, "%s: %llu events vs %llu", what,
                                  (unsigned long long)ev_cls, (unsigned long long)ev_full);
                usim_net_free(na);
                usim_net_free(nb);
            }
}
END_TEST

/* The tree all-reduce of one group: channel 0 alone on the quotient of the
 * network by the channels' rotations and the trees' mirror (tree_symmetric
 * in coll_class.c), against every channel of every node at full flow level.  Node
 * counts odd and even (the middle node its own mirror), GPUs in order, nodes
 * and GPUs permuted, half of each node's GPUs (the rest idle); bytes that
 * split evenly over the 2g channels (reduced), that do not (not reduced), and
 * one slice; Simple and LL; platforms where the symmetry holds and where it
 * does not (shared NICs, 72-GPU NVLink domains, full-mesh nodes). */
START_TEST(test_tree_symmetric_equal)
{
    static const char *const plats[] = {"dgx-a100-40g", "over4", "dgx-h100", "g4", "g2",
                                        "rails2", "gb200-nvl72", "mi300x-8"};
    static const int sym_ok[] = {1, 1, 1, 1, 1, 0, 0, 0};
    static const int nodes[] = {2, 3, 5, 8, 13};
    int ranks[13 * 72];
    uint64_t sa[13 * 72], sb[13 * 72], ra[13 * 72], rb[13 * 72];
    for (size_t pi = 0; pi < sizeof plats / sizeof plats[0]; pi++) {
        usim_platform pf;
        if (strcmp(plats[pi], "g4") == 0 || strcmp(plats[pi], "g2") == 0) {
            pf = load_platform("dgx-a100-40g");
            pf.gpus_per_node = plats[pi][1] - '0';
        } else {
            pf = platform_of(plats[pi]);
        }
        int gpn = pf.gpus_per_node, dom = usim_platform_domain(&pf);
        for (size_t ni = 0; ni < sizeof nodes / sizeof nodes[0]; ni++)
            for (int pl = 0; pl < 3; pl++)
                for (int bi = 0; bi < 3; bi++)
                    for (int pr = 0; pr < 2; pr++) {
                        int N = nodes[ni], G = N * dom, gl = pl == 2 ? dom / 2 : dom, P = N * gl;
                        if (gl < 1 || G > 13 * 72 || (pl == 2 && dom < 2) || (dom > gpn && N > 3))
                            continue;
                        for (int b = 0; b < N; b++)
                            for (int l = 0; l < gl; l++) {
                                /* permuted nodes and GPUs, or every other GPU of a node */
                                int bb = pl == 1 ? N % 2 ? (2 * b + 1) % N : N - 1 - b : b;
                                int ll = pl == 1 ? gl - 1 - l : pl == 2 ? 2 * l : l;
                                ranks[b * gl + l] = bb * dom + ll;
                            }
                        int64_t S = bi == 0 ? (int64_t)2 * gl * 1600000 : bi == 1 ? (int64_t)2 * gl * 1600000 + 3
                                                                                    : (int64_t)2 * gl * 100;
                        usim_coll c = {.type = USIM_ALLREDUCE, .ngroups = 1, .size = P, .ranks = ranks,
                                       .algo = USIM_ALGO_TREE, .proto = pr ? USIM_PROTO_LL : USIM_PROTO_SIMPLE,
                                       .chunk_total = S, .chunk_mult = 1};
                        usim_net *na = usim_net_new(&pf, G), *nb = usim_net_new(&pf, G);
                        usim_net_set_engine(na, USIM_ENGINE_FULL);
                        usim_net_set_engine(nb, USIM_ENGINE_CLASSES);
                        usim_coll_result a, b;
                        char what[128];
                        snprintf(what, sizeof what, "tree on %s, %d nodes, placement %d, bytes %lld, %s",
                                 plats[pi], N, pl, (long long)S, pr ? "LL" : "Simple");
                        ck_assert_msg(usim_coll_run(na, &c, &a, sa, ra) == USIM_OK, "%s: %s", what,
                                      usim_last_error());
                        uint64_t ev_full = usim_net_last_events(na);
                        ck_assert_msg(usim_coll_run(nb, &c, &b, sb, rb) == USIM_OK, "%s: %s", what,
                                      usim_last_error());
                        uint64_t ev_cls = usim_net_last_events(nb);
                        SAME_RESULT();
                        ck_assert_msg(a.algo == USIM_ALGO_TREE && a.channels == 2 * gl, "%s", what);
                        ck_assert_msg(memcmp(sa, sb, (size_t)G * sizeof *sa) == 0 &&
                                      memcmp(ra, rb, (size_t)G * sizeof *ra) == 0, "%s: counters", what);
                        /* reduced exactly when the symmetry holds */
                        int reduced = sym_ok[pi] && bi != 1 && dom == gpn;
                        ck_assert_msg(reduced ? ev_cls < ev_full : ev_cls == ev_full,
                                      "%s: %llu events vs %llu at full flow level", what,
                                      (unsigned long long)ev_cls, (unsigned long long)ev_full);
                        usim_net_free(na);
                        usim_net_free(nb);
                    }
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("classes");
    TCase *t = tcase_create("equal");
    tcase_set_timeout(t, 120);
    tcase_add_loop_test(t, test_iteration_equal, 0, (int)(sizeof shapes / sizeof shapes[0]));
    tcase_add_test(t, test_collectives_equal);
    tcase_add_test(t, test_single_ring_equal);
    tcase_add_test(t, test_interleaved_rings_equal);
    tcase_add_test(t, test_fallback);
    tcase_add_test(t, test_grid_equal);
    tcase_add_test(t, test_grid_fallback);
    tcase_add_test(t, test_pairwise_equal);
    tcase_add_test(t, test_search_pruning);
    tcase_add_test(t, test_cone_runs_equal);
    tcase_add_test(t, test_multiclass_equal);
    tcase_add_test(t, test_uneven_ring_equal);
    tcase_add_test(t, test_tree_symmetric_equal);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    SRunner *r = srunner_create(suite());
    srunner_set_fork_status(r, CK_NOFORK);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
