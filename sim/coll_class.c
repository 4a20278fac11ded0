/* SPDX-License-Identifier: Apache-2.0 */
/*
 * coll_class.c -- the class engine's analysis: which groups of a collective are
 * placed alike (classes of groups, colour refinement), and the link loads
 * that let one representative group stand for its copies.
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "usim.h"
#include "usim_internal.h"
#include "coll_internal.h"

int usim_ctab_init(ctab *t, int max)
{
    t->tb = 16;
    while (t->tb < (size_t)2 * max)
        t->tb *= 2;
    t->n = 0;
    t->tab = usim_malloc(t->tb * sizeof *t->tab);
    t->hs = usim_malloc((size_t)(max > 0 ? max : 1) * sizeof *t->hs);
    if (!t->tab || !t->hs) {
        free(t->tab); free(t->hs);
        return usim_set_error(USIM_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < t->tb; i++)
        t->tab[i] = -1;
    return USIM_OK;
}

/* The class of a key of hash h, or a new one (number t->n - 1, *added). */
int usim_ctab_class(ctab *t, uint64_t h, int (*same)(const void *ctx, int q), const void *ctx, int *added)
{
    *added = 0;
    for (size_t at = (size_t)h & (t->tb - 1);; at = (at + 1) & (t->tb - 1)) {
        int q = t->tab[at];
        if (q < 0) {
            t->tab[at] = t->n;
            t->hs[t->n] = h;
            *added = 1;
            return t->n++;
        }
        if (t->hs[q] == h && same(ctx, q))
            return q;
    }
}

void usim_ctab_free(ctab *t)
{
    free(t->tab);
    free(t->hs);
}

/* 64-bit hash of n ints. */
uint64_t usim_ints_hash(const int *v, size_t n)
{
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)n;
    for (size_t i = 0; i < n; i++) {
        h ^= (uint64_t)(uint32_t)v[i];
        h *= 1099511628211ULL;
        h ^= h >> 29;
    }
    return h;
}

/* The class tables stored after pos (analyze_groups), for G GPUs and NG groups. */
static void cls_decode(cls *k, int G, int NG)
{
    k->nrep = 1;
    k->lab = k->gcls = k->rep = k->csize = NULL;
    if (!k->pos || k->pos[G] <= 1)
        return;
    k->nrep = k->pos[G];
    k->lab = k->pos + G + 1;
    k->gcls = k->lab + G;
    k->rep = k->gcls + NG;
    k->csize = k->rep + k->nrep;
}

void usim_cls_free(cls *k)
{
    free(k->g0.pos);
    k->g0.pos = NULL;
    if (!k->borrowed)
        free(k->pos);
    k->pos = NULL;
    k->on = 0;
    k->g0.N = 0;
    k->nrep = 1;
    k->lab = k->gcls = k->rep = k->csize = NULL;
}

static uint64_t ranks_key(const usim_coll *c)
{
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)c->ngroups ^ ((uint64_t)c->size << 32);
    size_t n = (size_t)c->ngroups * c->size;
    for (size_t i = 0; i < n; i++) {
        h ^= (uint64_t)(uint32_t)c->ranks[i];
        h *= 1099511628211ULL;
        h ^= h >> 29;
    }
    return h;
}

/* Sorted positions of the group members in a unit; returns their number. */
static int unit_sig(usim_net *n, int kind, int u, const int *pos, int *out)
{
    int first, cnt, m = 0;
    usim_net_unit_range(n, kind, u, &first, &cnt);
    for (int h = first; h < first + cnt; h++) {
        if (pos[h] < 0)
            continue;
        int j = m++;
        while (j > 0 && out[j - 1] > pos[h]) {
            out[j] = out[j - 1];
            j--;
        }
        out[j] = pos[h];
    }
    return m;
}

static int analyze_groups(usim_net *n, const usim_coll *c, cls *k);

/* Decide whether c's groups are equivalent (k->on).  Returns a status.  The
 * collectives of one job share their groups: the last answer is kept on the
 * network, keyed by the group arrays' contents. */
int usim_cls_analyze(usim_net *n, const usim_coll *c, cls *k)
{
    usim_coll_engine *E = usim_net_coll_engine(n);
    memset(k, 0, sizeof *k);
    k->nrep = 1;
    k->mode = usim_coll_engine_mode(E);
    if (k->mode == USIM_ENGINE_FULL)
        return USIM_OK;
    if (usim_grid_make(n, c, &k->rg)) {
        k->on = 1;   /* refined grid: every group placed as group 0 (usim_grid_make) */
        return USIM_OK;
    }
    if (c->ngroups < 2 || c->size < 2) {
        k->on = 1;   /* one group: one class, no copies */
        return USIM_OK;
    }
    uint64_t key = ranks_key(c);
    int on;
    int *pos = usim_coll_engine_lookup(E, key, c->ngroups, c->size, &on);
    if (pos || on == 0) {
        k->on = on;
        k->pos = pos;
        k->borrowed = 1;
        cls_decode(k, usim_net_gpus(n), c->ngroups);
        return USIM_OK;
    }
    int rc = analyze_groups(n, c, k);
    if (!rc && k->pos) {
        usim_coll_engine_store(E, key, c->ngroups, c->size, k->pos);
        k->borrowed = 1;
    } else if (!rc && !k->on) {
        usim_coll_engine_store(E, key, c->ngroups, c->size, NULL);
    }
    return rc;
}

/* Classes of groups by signature: sig (NG rows of len ints, row gi the
 * signature of group gi) -> gcls[gi], numbered by first appearance (group
 * 0's class is 0).  Returns the number of classes, or -1 out of memory. */
typedef struct sigs {
    const int *sig;
    size_t len;
    const int *rep;
    int gi;
} sigs;

static int sig_same(const void *ctx, int q)
{
    const sigs *x = ctx;
    return memcmp(x->sig + (size_t)x->rep[q] * x->len, x->sig + (size_t)x->gi * x->len,
                  x->len * sizeof *x->sig) == 0;
}

static int sig_classes(const int *sig, size_t len, int NG, int *gcls, int *rep)
{
    ctab t;
    if (usim_ctab_init(&t, NG))
        return -1;
    sigs x = {sig, len, rep, 0};
    for (int gi = 0; gi < NG; gi++) {
        int added;
        x.gi = gi;
        gcls[gi] = usim_ctab_class(&t, usim_ints_hash(sig + (size_t)gi * len, len), sig_same, &x, &added);
        if (added)
            rep[gcls[gi]] = gi;
    }
    int nc = t.n;
    usim_ctab_free(&t);
    return nc;
}

/*
 * Classes of groups (colour refinement): groups start in one class per
 * partition of their positions over NICs, nodes and NVLink domains
 * (condition 2: the same transfers, routes and latencies); a class is then
 * split by the multisets of labels (class, position) that the NIC and node
 * of each of its positions hold, until no class splits.  In the end every
 * group of a class has the same partition as the class's representative,
 * and every unit holding its position p holds the same labels as the unit
 * holding the representative's position p (condition 3 with labels): each
 * copy of a representative's transfer sees its links in the same state, as
 * with one class.  k->on when some groups share a class (fewer classes than
 * groups); one class is the single-class case of analyze.
 */
static int analyze_groups(usim_net *n, const usim_coll *c, cls *k)
{
    int P = c->size, NG = c->ngroups, G = usim_net_gpus(n);
    int nu = usim_net_units(n, USIM_UNIT_NIC);
    int gpn = usim_net_platform(n)->gpus_per_node;
    int *stamp = usim_calloc((size_t)nu, sizeof *stamp), *first = usim_malloc((size_t)nu * sizeof *first);
    int *gcls = usim_malloc((size_t)NG * sizeof *gcls), *rep = usim_malloc((size_t)NG * sizeof *rep);
    int *lab = usim_malloc((size_t)G * sizeof *lab);
    size_t len1 = (size_t)USIM_NUNIT * P, len2 = 1 + (size_t)2 * P * (gpn + 1);
    int *sig = usim_malloc((size_t)NG * (len1 > len2 ? len1 : len2) * sizeof *sig);
    int ok = 1, rc = USIM_OK, nc = 0;
    k->pos = usim_malloc((size_t)(G + 1) * sizeof *k->pos);
    if (!k->pos || !stamp || !first || !gcls || !rep || !lab || !sig) {
        rc = usim_set_error(USIM_ENOMEM, "out of memory");
        ok = 0;
        goto out;
    }
    for (int g = 0; g < G; g++)
        k->pos[g] = lab[g] = -1;
    k->pos[G] = 1;
    for (size_t i = 0; i < (size_t)NG * P && ok; i++) {
        int g = c->ranks[i];
        if (k->pos[g] >= 0)
            ok = 0;   /* a GPU in two groups */
        k->pos[g] = (int)(i % (size_t)P);
    }
    if (!ok)
        goto out;
    /* the partition of each group's positions over units of every kind */
    for (int kind = 0; kind < USIM_NUNIT; kind++) {
        memset(stamp, 0, (size_t)nu * sizeof *stamp);
        for (int gi = 0; gi < NG; gi++) {
            const int *rk = c->ranks + (size_t)gi * P;
            int *s = sig + (size_t)gi * len1 + (size_t)kind * P;
            for (int p = 0; p < P; p++) {
                int u = usim_net_unit(n, kind, rk[p]);
                if (stamp[u] != gi + 1) {
                    stamp[u] = gi + 1;
                    first[u] = p;
                }
                s[p] = first[u];
            }
        }
    }
    if ((nc = sig_classes(sig, len1, NG, gcls, rep)) < 0)
        goto oom;
    /* refine by the labels the NICs and nodes of each position hold */
    for (;;) {
        for (int gi = 0; gi < NG; gi++)
            for (int p = 0; p < P; p++)
                lab[c->ranks[(size_t)gi * P + p]] = gcls[gi] * P + p;
        for (int gi = 0; gi < NG; gi++) {
            const int *rk = c->ranks + (size_t)gi * P;
            int *s = sig + (size_t)gi * len2;
            size_t m = 0;
            s[m++] = gcls[gi];
            for (int kind = 0; kind < USIM_UNIT_DOMAIN; kind++)
                for (int p = 0; p < P; p++) {
                    int cnt = unit_sig(n, kind, usim_net_unit(n, kind, rk[p]), lab, s + m + 1);
                    s[m] = cnt;
                    m += 1 + (size_t)cnt;
                }
            for (; m < len2; m++)
                s[m] = -2;
        }
        int nn = sig_classes(sig, len2, NG, gcls, rep);
        if (nn < 0)
            goto oom;
        if (nn == nc)
            break;
        nc = nn;
    }
    if (nc >= NG) {
        ok = 0;   /* no two groups alike: the full engine */
        goto out;
    }
    if (nc > 1) {
        /* pos, then nc, labels, classes of the groups, representatives, class sizes */
        size_t tot = (size_t)G + 1 + (size_t)G + (size_t)NG + 2 * (size_t)nc;
        int *a = usim_realloc(k->pos, tot * sizeof *a);
        if (!a)
            goto oom;
        k->pos = a;
        a[G] = nc;
        memcpy(a + G + 1, lab, (size_t)G * sizeof *a);
        memcpy(a + 2 * (size_t)G + 1, gcls, (size_t)NG * sizeof *a);
        int *rp = a + 2 * (size_t)G + 1 + NG, *cs = rp + nc;
        memcpy(rp, rep, (size_t)nc * sizeof *a);
        memset(cs, 0, (size_t)nc * sizeof *cs);
        for (int gi = 0; gi < NG; gi++)
            cs[gcls[gi]]++;
    }
    goto out;
oom:
    rc = usim_set_error(USIM_ENOMEM, "out of memory");
    ok = 0;
out:
    free(stamp); free(first); free(gcls); free(rep); free(lab); free(sig);
    if (!ok)
        usim_cls_free(k);
    else {
        k->on = 1;
        cls_decode(k, G, NG);
    }
    return rc;
}

typedef struct load_ent {
    int kind, pos, link, w;
} load_ent;

static int ent_cmp(const void *a, const void *b)
{
    const load_ent *x = a, *y = b;
    if (x->kind != y->kind)
        return (x->kind > y->kind) - (x->kind < y->kind);
    if (x->pos != y->pos)
        return (x->pos > y->pos) - (x->pos < y->pos);
    return (x->link > y->link) - (x->link < y->link);
}

static int int_cmp(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Appends (link, weight) to the two parallel arrays, doubling them when full; -1 when out of memory
 * (the arrays stay valid for the caller to free). */
static int push_load(int **olink, int **ow, size_t *tot, size_t *tcap, int link, int w)
{
    if (*tot == *tcap) {
        size_t cap = *tcap * 2;
        int *a = usim_realloc(*olink, cap * sizeof *a);
        if (!a)
            return -1;
        *olink = a;
        int *b = usim_realloc(*ow, cap * sizeof *b);
        if (!b)
            return -1;
        *ow = b;
        *tcap = cap;
    }
    (*olink)[*tot] = link;
    (*ow)[(*tot)++] = w;
    return 0;
}

/* The loads of group 0's transfers: transfer t loads link L (a link of group
 * 0's routes) once per GPU behind L at t's position on L's side (its copies
 * crossing L).  Fills ld (arrays owned by the caller: free ld->off etc.). */
int usim_cls_build_loads(usim_net *n, const cls *k, const usim_xfer *x, int nx, usim_loads *ld)
{
    int *links = usim_malloc((size_t)(4 * nx + 1) * sizeof *links), nl = 0;
    int *off = usim_malloc((size_t)(nx + 1) * sizeof *off);
    load_ent *e = NULL;
    int *olink = NULL, *ow = NULL, rc = USIM_OK;
    if (!links || !off)
        goto oom;
    for (int i = 0; i < nx; i++) {
        if (x[i].src == x[i].dst)
            continue;
        usim_time lat;
        int cl;
        nl += usim_net_route(n, x[i].src, x[i].dst, links + nl, &lat, &cl);
    }
    qsort(links, (size_t)nl, sizeof *links, int_cmp);
    int nu = 0;
    for (int i = 0; i < nl; i++)
        if (nu == 0 || links[i] != links[nu - 1])
            links[nu++] = links[i];
    size_t ne = 0, cap = 0;
    for (int i = 0; i < nu; i++) {
        int side, first, cnt, kind = usim_net_link_users(n, links[i], &side, &first, &cnt);
        if (kind == USIM_LINK_MESH)
            continue;   /* one pair's link: its transfers alone */
        for (int h = first; h < first + cnt; h++) {
            int ph = cls_lab(k, h);
            if (ph < 0)
                continue;
            if (ne == cap) {
                cap = cap ? 2 * cap : 256;
                load_ent *nw = usim_realloc(e, cap * sizeof *nw);
                if (!nw)
                    goto oom;
                e = nw;
            }
            e[ne++] = (load_ent){kind, ph, links[i], 1};
        }
    }
    if (ne > 0)   /* none when every link is a mesh link */
        qsort(e, ne, sizeof *e, ent_cmp);
    size_t m = 0;
    for (size_t i = 0; i < ne; i++) {
        if (m > 0 && ent_cmp(&e[m - 1], &e[i]) == 0)
            e[m - 1].w++;
        else
            e[m++] = e[i];
    }
    /* per transfer: the entries of (kind, position) of each of its own links */
    size_t tot = 0, tcap = (size_t)4 * nx + 16;
    olink = usim_malloc(tcap * sizeof *olink);
    ow = usim_malloc(tcap * sizeof *ow);
    if (!olink || !ow)
        goto oom;
    for (int i = 0; i < nx; i++) {
        off[i] = (int)tot;
        if (x[i].src == x[i].dst)
            continue;
        int rl[4], cl;
        usim_time lat;
        int r = usim_net_route(n, x[i].src, x[i].dst, rl, &lat, &cl);
        for (int j = 0; j < r; j++) {
            int side, first, cnt, kind = usim_net_link_users(n, rl[j], &side, &first, &cnt);
            if (kind == USIM_LINK_MESH) {
                if (push_load(&olink, &ow, &tot, &tcap, rl[j], 1))
                    goto oom;
                continue;
            }
            int g = side ? x[i].dst : x[i].src;
            load_ent key = {kind, cls_lab(k, g), -1, 0};
            size_t lo = 0, hi = m;   /* first entry >= key */
            while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (ent_cmp(&e[mid], &key) < 0)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            for (size_t q = lo; q < m && e[q].kind == kind && e[q].pos == key.pos; q++) {
                if (push_load(&olink, &ow, &tot, &tcap, e[q].link, e[q].w))
                    goto oom;
            }
        }
    }
    if (tot > (size_t)INT_MAX)
        goto oom;
    off[nx] = (int)tot;
    free(links);
    free(e);
    ld->off = off;
    ld->link = olink;
    ld->w = ow;
    return USIM_OK;
oom:
    free(links); free(off); free(e); free(olink); free(ow);
    rc = usim_set_error(USIM_ENOMEM, "out of memory for the link loads");
    return rc;
}
