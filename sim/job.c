/*
 * job.c -- a training job: method, recompute and communication-kind names;
 * degrees (SP, TP, DP, USP's ulysses x ring) resolved and validated against
 * the model and the platform; placement of the groups on GPUs.
 *
 * Not here: shapes and FLOPs (cost.c), the collectives the groups run
 * (jobcoll.c).
 */
#include <stdlib.h>
#include <string.h>

#include "job.h"
#include "usim.h"
#include "usim_internal.h"

/* ------------------------------------------------------------ names */

const char *usim_method_name(usim_method m)
{
    static const char *const n[USIM_NMETHOD] = {"ulysses", "megatron-sp", "ring", "ring-zigzag", "usp"};
    return (m >= 0 && m < USIM_NMETHOD) ? n[m] : "?";
}

int usim_method_parse(const char *s, usim_method *m)
{
    for (int i = 0; i < USIM_NMETHOD; i++)
        if (strcmp(s, usim_method_name((usim_method)i)) == 0) {
            *m = (usim_method)i;
            return USIM_OK;
        }
    if (strcmp(s, "zigzag") == 0) {
        *m = USIM_RING_ZIGZAG;
        return USIM_OK;
    }
    return usim_set_error(USIM_EINVAL,
                          "unknown method '%s' (ulysses, megatron-sp, ring, ring-zigzag, usp)", s);
}

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
    if (j->method < 0 || j->method >= USIM_NMETHOD)
        return usim_set_error(USIM_EINVAL, "unknown method %d", (int)j->method);
    const char *mn = usim_method_name(j->method);
    int rc = usim_platform_check_gpus(p, j->gpus);
    if (rc)
        return rc;
    int gpn = p->gpus_per_node;
    if (j->zero < 0 || j->zero > 3)
        return usim_set_error(USIM_EINVAL, "--zero must be 0, 1, 2 or 3 (got %d)", j->zero);
    if (j->sp < 0 || j->tp < 0 || j->dp < 0 || j->ulysses < 0)
        return usim_set_error(USIM_EINVAL, "parallel degrees must be positive");
    if (j->a2a != USIM_A2A_DIRECT && j->a2a != USIM_A2A_PAIRWISE)
        j->a2a = USIM_A2A_DIRECT;
    if (j->method == USIM_MEGATRON_SP) {
        if (j->tp && j->sp && j->tp != j->sp)
            return usim_set_error(USIM_EINVAL, "megatron-sp: --tp (%d) and --sp (%d) must be equal",
                                  j->tp, j->sp);
        if (j->tp)
            j->sp = j->tp;
    } else if (j->tp > 1) {
        return usim_set_error(USIM_EINVAL, "%s: --tp applies to megatron-sp only (got --tp %d)", mn,
                              j->tp);
    }
    if (j->sp == 0) {
        if (j->dp) {
            if (j->gpus % j->dp != 0)
                return usim_set_error(USIM_EINVAL, "degrees do not multiply to the GPU count: "
                                      "--dp %d does not divide --gpus %d", j->dp, j->gpus);
            j->sp = j->gpus / j->dp;
        } else {
            j->sp = largest_divisor_le(j->gpus, m->heads,
                                       j->method == USIM_MEGATRON_SP ? m->heads : 0);
        }
    }
    if (j->dp == 0)
        j->dp = j->gpus / j->sp;
    if ((int64_t)j->sp * j->dp != j->gpus)
        return usim_set_error(USIM_EINVAL,
                              "degrees do not multiply to the GPU count: sp %d x dp %d = %lld, not %d",
                              j->sp, j->dp, (long long)j->sp * j->dp, j->gpus);
    if (j->method == USIM_MEGATRON_SP)
        j->tp = j->sp;
    else
        j->tp = 1;
    switch (j->method) {
    case USIM_ULYSSES:
        if (j->sp > m->heads)
            return usim_set_error(USIM_EINVAL,
                                  "ulysses: SP degree %d exceeds the %lld attention heads (use usp)",
                                  j->sp, (long long)m->heads);
        j->ulysses = j->sp;
        break;
    case USIM_MEGATRON_SP:
        if (m->heads % j->tp != 0)
            return usim_set_error(USIM_EINVAL,
                                  "megatron-sp: TP degree %d does not divide the %lld heads", j->tp,
                                  (long long)m->heads);
        j->ulysses = 1;
        break;
    case USIM_RING: case USIM_RING_ZIGZAG:
        j->ulysses = 1;
        break;
    case USIM_USP:
        if (j->ulysses == 0) {
            int64_t cap = m->heads < gpn ? m->heads : gpn;
            j->ulysses = largest_divisor_le(j->sp, cap, 0);
        }
        if (j->sp % j->ulysses != 0)
            return usim_set_error(USIM_EINVAL, "usp: ulysses degree %d does not divide SP degree %d",
                                  j->ulysses, j->sp);
        if (j->ulysses > m->heads)
            return usim_set_error(USIM_EINVAL, "usp: ulysses degree %d exceeds the %lld heads",
                                  j->ulysses, (long long)m->heads);
        break;
    default:
        break;
    }
    int gran = j->sp * ((j->method == USIM_RING_ZIGZAG || j->method == USIM_USP) ? 2 : 1);
    if (m->seq < gran)
        return usim_set_error(USIM_EINVAL, "%s: sequence %lld is shorter than %d (%s needs >= %d tokens)",
                              mn, (long long)m->seq, gran, mn, gran);
    return USIM_OK;
}

/* ------------------------------------------------------------ placement */

void usim_layout_free(usim_layout *l)
{
    free(l->sp_ranks);
    free(l->ring_ranks);
    free(l->z_ranks);
}

int usim_layout_make(const usim_job *j, usim_layout *l)
{
    memset(l, 0, sizeof *l);
    int G = j->gpus, P = j->sp;
    int a2a = j->method == USIM_USP ? j->ulysses : P;
    l->sp_size = a2a;
    l->sp_ng = G / a2a;
    l->sp_ranks = usim_malloc((size_t)G * sizeof *l->sp_ranks);
    l->z_ranks = usim_malloc((size_t)G * sizeof *l->z_ranks);
    l->ring_ranks = usim_malloc((size_t)G * sizeof *l->ring_ranks);
    if (!l->sp_ranks || !l->z_ranks || !l->ring_ranks) {
        usim_layout_free(l);
        return usim_set_error(USIM_ENOMEM, "out of memory");
    }
    for (int i = 0; i < G; i++)
        l->sp_ranks[i] = i;
    /* usp ring groups: within SP group g, ring j holds g*P + p*u + j */
    int u = j->ulysses, r = P / u;
    l->ring_size = r;
    l->ring_ng = G / r;
    int k = 0;
    for (int g = 0; g < G / P; g++)
        for (int jj = 0; jj < u; jj++)
            for (int p = 0; p < r; p++)
                l->ring_ranks[k++] = g * P + p * u + jj;
    if (j->method == USIM_MEGATRON_SP) {
        /* data-parallel groups: stride tp */
        l->z_size = j->dp;
        l->z_ng = j->tp;
        k = 0;
        for (int t = 0; t < j->tp; t++)
            for (int p = 0; p < j->dp; p++)
                l->z_ranks[k++] = p * j->tp + t;
    } else {
        l->z_size = G;
        l->z_ng = 1;
        for (int i = 0; i < G; i++)
            l->z_ranks[i] = i;
    }
    return USIM_OK;
}
