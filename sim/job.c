/* SPDX-License-Identifier: Apache-2.0 */
/*
 * job.c -- a training job: the order methods are listed in, recompute and
 * communication-kind names;
 * degrees (SP, TP, DP, USP's ulysses x ring) resolved and validated against
 * the model and the platform; placement of the groups on GPUs.
 *
 * Not here: shapes and FLOPs (cost.c), the collectives the groups run
 * (jobcoll.c).
 */
#include <stdlib.h>
#include <string.h>

#include "job.h"
#include "pipeline.h"
#include "usim.h"
#include "usim_internal.h"

/* ------------------------------------------------------------ names */

const uly_method usim_method_order[ULY_METHOD_ALL] = {
    ULY_METHOD_ULYSSES, ULY_METHOD_MEGATRON_SP, ULY_METHOD_RING, ULY_METHOD_ZIGZAG, ULY_METHOD_USP,
    ULY_METHOD_ALLGATHER};

const char *usim_recompute_name(usim_recompute r)
{
    static const char *const n[3] = {"none", "selective", "full"};
    return (r >= 0 && r <= USIM_RC_FULL) ? n[r] : "?";
}

const char *usim_kind_name(int kind)
{
    static const char *const n[USIM_NKIND] = {"sp", "param", "grad"};
    return (kind >= 0 && kind < USIM_NKIND) ? n[kind] : "?";
}

/* ------------------------------------------------------------ job */

static int largest_divisor_le(int n, int64_t cap, int64_t must_divide)
{
    for (int d = (int)(cap < n ? cap : n); d >= 1; d--)
        if (n % d == 0 && (must_divide == 0 || must_divide % d == 0))
            return d;
    return 1;
}

int usim_platform_check_gpus(const usim_platform *p, int gpus)
{
    int gpn = p->gpus_per_node;
    if (gpus < 1)
        return usim_set_error(USIM_EINVAL, "--gpus must be >= 1 (got %d)", gpus);
    if (gpus > gpn && gpus % gpn != 0)
        return usim_set_error(USIM_EINVAL,
                              "--gpus %d spans nodes but is not a multiple of %d GPUs per node (%s)",
                              gpus, gpn, p->name);
    int nodes = (gpus + gpn - 1) / gpn;
    if (p->max_nodes > 0 && nodes > p->max_nodes)
        return usim_set_error(USIM_EINVAL, "--gpus %d needs %d nodes; platform %s has at most %d",
                              gpus, nodes, p->name, p->max_nodes);
    return USIM_OK;
}

int usim_job_resolve(const usim_model *m, const usim_platform *p, usim_job *j)
{
    if (j->method < 0 || j->method >= ULY_METHOD_ALL)
        return usim_set_error(USIM_EINVAL, "unknown method %d", (int)j->method);
    const char *mn = uly_method_sim_name(j->method);
    int rc = usim_platform_check_gpus(p, j->gpus);
    if (rc)
        return rc;
    int gpn = usim_platform_domain(p);   /* GPUs reachable over NVLink */
    if (j->zero < 0 || j->zero > 3)
        return usim_set_error(USIM_EINVAL, "--zero must be 0, 1, 2 or 3 (got %d)", j->zero);
    if (j->sp < 0 || j->tp < 0 || j->dp < 0 || j->ulysses < 0 || j->pp < 0)
        return usim_set_error(USIM_EINVAL, "parallel degrees must be positive");
    if (j->a2a != USIM_A2A_DIRECT && j->a2a != USIM_A2A_PAIRWISE)
        j->a2a = USIM_A2A_DIRECT;
    if (j->attn_kernel != USIM_ATTN_FLASH && j->attn_kernel != USIM_ATTN_UNFUSED)
        return usim_set_error(USIM_EINVAL, "unknown attention kernel %d", j->attn_kernel);
    if (j->attn_dropout && j->attn_kernel != USIM_ATTN_UNFUSED)
        return usim_set_error(USIM_EINVAL, "--attn-dropout applies to --attn-kernel unfused (FlashAttention "
                              "applies dropout inside its kernel, at no HBM cost)");
    if (!usim_attn_kernel_runs(j->method, j->attn_kernel))
        return usim_set_error(USIM_EINVAL, "--attn-kernel unfused: %s combines blockwise partial results "
                              "through their log-sum-exp, which needs a fused kernel (unfused attention "
                              "runs with ulysses and megatron-sp)", mn);
    int PP = j->pp ? j->pp : 1;
    j->pp = PP;
    if (!j->pp_first_layers && !j->pp_last_layers && m->layers % PP != 0)   /* uneven: pipeline.c */
        return usim_set_error(USIM_EINVAL, "--pp %d does not divide the %lld layers", PP,
                              (long long)m->layers);
    if (j->gpus % PP != 0)
        return usim_set_error(USIM_EINVAL, "degrees do not multiply to the GPU count: --pp %d does not "
                              "divide --gpus %d", PP, j->gpus);
    int T;
    if (j->method == ULY_METHOD_MEGATRON_SP) {
        if (j->tp && j->sp && j->tp != j->sp)
            return usim_set_error(USIM_EINVAL, "megatron-sp: --tp (%d) and --sp (%d) must be equal",
                                  j->tp, j->sp);
        if (j->tp)
            j->sp = j->tp;
        T = 1;   /* megatron-sp's tensor parallelism is its SP degree */
    } else {
        T = j->tp ? j->tp : 1;
        if ((j->gpus / PP) % T != 0)
            return usim_set_error(USIM_EINVAL, "degrees do not multiply to the GPU count: --tp %d x --pp "
                                  "%d does not divide --gpus %d", T, PP, j->gpus);
        if (m->heads % T != 0)
            return usim_set_error(USIM_EINVAL, "%s: TP degree %d does not divide the %lld heads", mn, T,
                                  (long long)m->heads);
        if (m->kv_heads % T != 0 && T % m->kv_heads != 0)
            return usim_set_error(USIM_EINVAL,
                                  "%s: TP degree %d and the %lld KV heads: neither divides the other", mn,
                                  T, (long long)m->kv_heads);
    }
    int rest = j->gpus / PP / T;   /* GPUs per (tensor, pipeline) slot: sp x dp */
    int64_t heads_t = m->heads / T;
    if (j->sp == 0) {
        if (j->dp) {
            if (rest % j->dp != 0)
                return usim_set_error(USIM_EINVAL, "degrees do not multiply to the GPU count: "
                                      "--dp %d does not divide --gpus %d", j->dp, j->gpus);
            j->sp = rest / j->dp;
        } else {
            j->sp = largest_divisor_le(rest, heads_t,
                                       j->method == ULY_METHOD_MEGATRON_SP ? m->heads : 0);
        }
    }
    if (j->dp == 0)
        j->dp = rest / j->sp;
    if ((int64_t)j->sp * j->dp * T * PP != j->gpus) {
        if (T == 1 && PP == 1)
            return usim_set_error(USIM_EINVAL,
                                  "degrees do not multiply to the GPU count: sp %d x dp %d = %lld, not %d",
                                  j->sp, j->dp, (long long)j->sp * j->dp, j->gpus);
        return usim_set_error(USIM_EINVAL,
                              "degrees do not multiply to the GPU count: tp %d x cp %d x pp %d x dp %d = "
                              "%lld, not %d", T, j->sp, PP, j->dp, (long long)T * j->sp * PP * j->dp,
                              j->gpus);
    }
    if (j->method == ULY_METHOD_MEGATRON_SP)
        j->tp = j->sp;
    else
        j->tp = T;
    switch (j->method) {
    case ULY_METHOD_ULYSSES:
        if (j->sp > heads_t) {
            if (T == 1)
                return usim_set_error(USIM_EINVAL,
                                      "ulysses: SP degree %d exceeds the %lld attention heads (use usp)",
                                      j->sp, (long long)m->heads);
            return usim_set_error(USIM_EINVAL,
                                  "ulysses: SP degree %d exceeds the %lld attention heads per tensor-parallel "
                                  "rank (%lld heads / TP %d; use usp)", j->sp, (long long)heads_t,
                                  (long long)m->heads, T);
        }
        j->ulysses = j->sp;
        break;
    case ULY_METHOD_MEGATRON_SP:
        if (m->heads % j->tp != 0)
            return usim_set_error(USIM_EINVAL,
                                  "megatron-sp: TP degree %d does not divide the %lld heads", j->tp,
                                  (long long)m->heads);
        j->ulysses = 1;
        break;
    case ULY_METHOD_RING: case ULY_METHOD_ZIGZAG: case ULY_METHOD_ALLGATHER:
        j->ulysses = 1;
        break;
    case ULY_METHOD_USP:
        if (j->ulysses == 0) {
            int64_t in_node = gpn / T >= 1 ? gpn / T : 1;
            int64_t cap = heads_t < in_node ? heads_t : in_node;
            j->ulysses = largest_divisor_le(j->sp, cap, 0);
        }
        if (j->sp % j->ulysses != 0)
            return usim_set_error(USIM_EINVAL, "usp: ulysses degree %d does not divide SP degree %d",
                                  j->ulysses, j->sp);
        if (j->ulysses > heads_t)
            return usim_set_error(USIM_EINVAL, "usp: ulysses degree %d exceeds the %lld heads%s", j->ulysses,
                                  (long long)heads_t, T > 1 ? " per tensor-parallel rank" : "");
        break;
    default:
        break;
    }
    int two = (uly_method_traits(j->method) & ULY_TRAIT_ZIGZAG) != 0;
    int gran = j->sp * (two ? 2 : 1) * T;
    if (m->seq < gran)
        return usim_set_error(USIM_EINVAL, "%s: sequence %lld is shorter than %d (%s needs >= %d tokens)",
                              mn, (long long)m->seq, gran, mn, gran);
    if (two && m->seq % (2 * (int64_t)j->sp) != 0) {
        /* zigzag load balancing (Megatron's p2p, USP's ring, Llama-3's
         * all-gather CP) cuts the sequence into 2 x CP equal chunks */
        int64_t c2 = 2 * (int64_t)j->sp, lo = m->seq / c2 * c2;
        return usim_set_error(USIM_EINVAL, "%s: sequence %lld is not a multiple of 2 x CP = %lld (zigzag "
                              "load balancing cuts it into 2 x CP equal chunks); nearest valid: %lld or %lld",
                              mn, (long long)m->seq, (long long)c2, (long long)lo, (long long)(lo + c2));
    }
    return usim_pp_check(m, j);   /* vpp, uneven stages (pipeline.c) */
}

void usim_job_placement(const usim_platform *p, const usim_job *j, char *out, size_t outlen)
{
    /* rank = t + T (c + C (d + D s)): tensor fastest, then context (usp: its all-to-all
     * part fastest), data, pipeline */
    int megatron = j->method == ULY_METHOD_MEGATRON_SP;
    int T = megatron ? j->sp : j->tp, C = megatron ? 1 : j->sp;
    int usp = j->method == ULY_METHOD_USP;
    int dims[5] = {T, usp ? j->ulysses : C, usp ? C / j->ulysses : 1, j->dp, j->pp};
    const char *names[5] = {"tp", usp ? "cp a2a" : "cp", "cp p2p", "dp", "pp"};
    int gpn = usim_platform_domain(p);   /* NVLink reach: the node, or a multi-node domain */
    const char *unit = gpn > p->gpus_per_node ? "NVLink domain" : "node";
    int64_t span = 1;
    char in[200] = "", across[200] = "";
    for (int k = 0; k < 5; k++) {
        if (dims[k] < 2)
            continue;
        char item[64];
        snprintf(item, sizeof item, "%s %d", names[k], dims[k]);
        int inside = span * dims[k] <= gpn;
        if (!inside && span < gpn)   /* straddles the node boundary */
            snprintf(item + strlen(item), sizeof item - strlen(item), " (%lld per %s)",
                     (long long)(gpn / span), unit);
        char *dst = inside ? in : across;
        size_t l = strlen(dst);
        snprintf(dst + l, sizeof in - l, "%s%s", l ? " x " : "", item);
        span *= dims[k];
    }
    if (!*in && !*across)
        snprintf(out, outlen, "one GPU");
    else
        snprintf(out, outlen, "%s%s%s%s%s%s%s", in, *in ? " inside a" : "", *in ? (unit[0] == 'N' ? "n " : " ") : "",
                 *in ? unit : "", *in && *across ? "; " : "", across,
                 *across ? (unit[0] == 'N' ? " across NVLink domains" : " across nodes") : "");
}

/* ------------------------------------------------------------ placement */

void usim_layout_free(usim_layout *l)
{
    (void)l;   /* nothing allocated */
}

/* Append digit (n, stride) to a grid (least significant first). */
static void grid_dim(usim_grid *g, int n, int stride)
{
    g->dim[g->ndim].n = n;
    g->dim[g->ndim].stride = stride;
    g->ndim++;
}

int usim_layout_make(const usim_job *j, usim_layout *l)
{
    memset(l, 0, sizeof *l);
    int G = j->gpus;
    int megatron = j->method == ULY_METHOD_MEGATRON_SP;
    /* rank = t + T (c + C (d + D s)) */
    int T = megatron ? j->sp : (j->tp ? j->tp : 1), C = megatron ? 1 : j->sp;
    int D = j->dp, S = j->pp ? j->pp : 1;
    int u = megatron ? 1 : j->ulysses, r = C / u;
    /* tensor-parallel groups: T consecutive ranks */
    l->tp_size = T;
    l->tp_ng = G / T;
    grid_dim(&l->tp, G, 1);
    if (megatron) {
        /* megatron-sp: its SP collectives run on the tensor-parallel groups */
        l->sp_size = T;
        l->sp_ng = G / T;
        grid_dim(&l->sp, G, 1);
    } else {
        /* all-to-all groups (usp): u consecutive context positions (ring position q, member a:
         * context position c = q u + a); ring groups: the r positions {q u + a}.  The other
         * methods' collectives run on whole context groups.  Index order (least significant
         * first): a, q, t, d, s. */
        int ua = j->method == ULY_METHOD_USP ? u : C, ra = C / ua;
        l->sp_size = ua;
        l->sp_ng = G / ua;
        grid_dim(&l->sp, ua, T);
        grid_dim(&l->sp, ra, T * ua);
        grid_dim(&l->sp, T, 1);
        grid_dim(&l->sp, D, T * C);
        grid_dim(&l->sp, S, T * C * D);
    }
    /* ring groups: q, a, t, d, s */
    l->ring_size = r;
    l->ring_ng = G / r;
    grid_dim(&l->ring, r, T * u);
    grid_dim(&l->ring, u, T);
    grid_dim(&l->ring, T, 1);
    grid_dim(&l->ring, D, T * C);
    grid_dim(&l->ring, S, T * C * D);
    /* ZeRO / data-parallel groups: the ranks holding the same parameters (same t, same
     * stage): c, d, t, s */
    l->z_size = C * D;
    l->z_ng = T * S;
    grid_dim(&l->z, C, T);
    grid_dim(&l->z, D, T * C);
    grid_dim(&l->z, T, 1);
    grid_dim(&l->z, S, T * C * D);
    /* pipeline groups: one rank per stage: s, t, c, d */
    l->pp_size = S;
    l->pp_ng = G / S;
    grid_dim(&l->pp, S, T * C * D);
    grid_dim(&l->pp, T, 1);
    grid_dim(&l->pp, C, T);
    grid_dim(&l->pp, D, T * C);
    return USIM_OK;
}
