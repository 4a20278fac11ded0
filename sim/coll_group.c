/* SPDX-License-Identifier: Apache-2.0 */
/*
 * coll_group.c -- group descriptions of a collective: groups given as a grid
 * (refined at the unit sizes), their ranks, and the placement of a group on
 * NVLink domains (its geometry).  The collective files share these through
 * coll_internal.h.
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "usim.h"
#include "usim_internal.h"
#include "coll_internal.h"

/* GPU of index i = g * size + p. */
int usim_grid_rank(const rgrid *R, int64_t i)
{
    int64_t h = 0;
    for (int k = 0; k < R->nd; k++)
        h += (i / R->fw[k]) % R->n[k] * R->stride[k];
    return (int)h;
}

/* Position of GPU h in its group, -1 if in none. */
int usim_grid_pos(const rgrid *R, int h)
{
    if (h < 0 || h >= R->M)
        return -1;
    int64_t p = 0;
    for (int k = 0; k < R->nd; k++)
        if (R->fw[k] < R->P)
            p += (int64_t)(h / R->stride[k] % R->n[k]) * R->fw[k];
    return (int)p;
}

/* Build R from c->grid on net n.  Returns 1 if usable, 0 if the ranks must
 * be listed (no grid, bad grid, or unit sizes across digits). */
int usim_grid_make(usim_net *n, const usim_coll *c, rgrid *R)
{
    memset(R, 0, sizeof *R);
    const usim_grid *gd = c->grid;
    if (c->ranks || !gd || gd->ndim < 0 || gd->ndim > USIM_GRID_MAXDIM)
        return 0;
    int64_t fw = 1, G = usim_net_gpus(n), at_p = c->size == 1;
    R->P = c->size;
    for (int k = 0; k < gd->ndim; k++) {
        if (gd->dim[k].n < 1 || gd->dim[k].stride < 1)
            return 0;
        if (gd->dim[k].n > 1) {   /* insertion by stride */
            int j = R->nd++;
            while (j > 0 && R->stride[j - 1] > gd->dim[k].stride) {
                R->n[j] = R->n[j - 1];
                R->stride[j] = R->stride[j - 1];
                R->fw[j] = R->fw[j - 1];
                j--;
            }
            R->n[j] = gd->dim[k].n;
            R->stride[j] = gd->dim[k].stride;
            R->fw[j] = fw;
        }
        fw *= gd->dim[k].n;
        at_p |= fw == c->size;
        if (fw > G)
            return 0;
    }
    if (fw != (int64_t)c->ngroups * c->size || !at_p)
        return 0;
    /* a bijection onto [0, M): strides 1, n0, n0 n1, ... */
    int64_t s = 1;
    for (int k = 0; k < R->nd; k++) {
        if (R->stride[k] != s)
            return 0;
        s *= R->n[k];
    }
    R->M = s;
    for (int kind = 0; kind < USIM_NUNIT; kind++) {
        int first, U;
        usim_net_unit_range(n, kind, 0, &first, &U);
        if (kind == USIM_UNIT_DOMAIN)
            R->dom = U;
        if (U >= R->M)
            continue;
        if (R->M % U)
            return 0;
        for (int k = 0; k < R->nd; k++) {
            int64_t lo = R->stride[k], hi = lo * R->n[k];
            if (U <= lo || U >= hi)
                continue;
            if (U % lo || hi % U || R->nd == RG_MAX)
                return 0;
            int a = (int)(U / lo);
            for (int j = R->nd; j > k + 1; j--) {
                R->n[j] = R->n[j - 1];
                R->stride[j] = R->stride[j - 1];
                R->fw[j] = R->fw[j - 1];
            }
            R->nd++;
            R->n[k + 1] = R->n[k] / a;
            R->stride[k + 1] = U;
            R->fw[k + 1] = R->fw[k] * a;
            R->n[k] = a;
            break;
        }
    }
    for (int k = 0; k < R->nd; k++) {
        if (R->fw[k] >= R->P)
            continue;
        int *list = R->stride[k] < R->dom ? R->lo : R->hi, *cnt = R->stride[k] < R->dom ? &R->nlo : &R->nhi;
        int j = (*cnt)++;
        while (j > 0 && R->fw[list[j - 1]] > R->fw[k]) {
            list[j] = list[j - 1];
            j--;
        }
        list[j] = k;
        if (R->stride[k] < R->dom)
            R->blo += (int64_t)(R->n[k] - 1) * R->fw[k];
    }
    R->on = 1;
    return 1;
}

/* The position of ring index b g + l of group 0's geometry: the b-th NVLink
 * domain in order of first appearance (the above-domain digits, least
 * weighty first), its l-th position in group order. */
int usim_grid_geo_pos(const rgrid *R, int b, int l)
{
    int64_t p = 0;
    for (int j = 0; j < R->nlo; j++) {
        int k = R->lo[j];
        p += (int64_t)(l % R->n[k]) * R->fw[k];
        l /= R->n[k];
    }
    for (int j = 0; j < R->nhi; j++) {
        int k = R->hi[j];
        p += (int64_t)(b % R->n[k]) * R->fw[k];
        b /= R->n[k];
    }
    return (int)p;
}

/* A copy of c with its ranks listed (*arr to free), for the paths that walk
 * every group. */
int usim_grid_list(const usim_coll *c, usim_coll *out, int **arr)
{
    *out = *c;
    *arr = NULL;
    const usim_grid *gd = c->grid;
    if (!gd)
        return usim_set_error(USIM_EINVAL, "%s: neither ranks nor a grid", usim_coll_name(c->type));
    size_t tot = (size_t)c->ngroups * (size_t)c->size;
    int64_t fw = 1;
    for (int k = 0; k < gd->ndim && gd->ndim <= USIM_GRID_MAXDIM; k++) {
        if (gd->dim[k].n < 1 || gd->dim[k].stride < 0)
            break;
        fw *= gd->dim[k].n;
    }
    if (gd->ndim < 0 || gd->ndim > USIM_GRID_MAXDIM || fw != (int64_t)tot)
        return usim_set_error(USIM_EINVAL, "%s: the grid does not describe %d groups of %d",
                              usim_coll_name(c->type), c->ngroups, c->size);
    int *a = usim_malloc((tot ? tot : 1) * sizeof *a);
    if (!a)
        return usim_set_error(USIM_ENOMEM, "out of memory");
    /* index i's digits (least significant first) as an odometer: h is
     * sum digit_k * stride_k */
    int dig[USIM_GRID_MAXDIM] = {0};
    int64_t h = 0;
    for (size_t i = 0; i < tot; i++) {
        a[i] = h > INT_MAX ? -1 : (int)h;
        for (int k = 0; k < gd->ndim; k++) {
            if (++dig[k] < gd->dim[k].n) {
                h += gd->dim[k].stride;
                break;
            }
            h -= (int64_t)(gd->dim[k].n - 1) * gd->dim[k].stride;
            dig[k] = 0;
        }
    }
    out->ranks = a;
    out->grid = NULL;
    *arr = a;
    return USIM_OK;
}

int usim_coll_rank(const usim_coll *c, int g, int p)
{
    int64_t i = (int64_t)g * c->size + p;
    if (c->ranks)
        return c->ranks[i];
    int64_t h = 0;
    for (int k = 0; k < c->grid->ndim; k++) {
        h += i % c->grid->dim[k].n * c->grid->dim[k].stride;
        i /= c->grid->dim[k].n;
    }
    return (int)h;
}

/* Groups up to this size have their geometry and group 0's ranks listed from
 * the grid (a lookup per transfer instead of a decode); larger ones (the
 * ZeRO ring over 65536 GPUs and more) are decoded where used: listing costs
 * O(P) per generation, while the ring's light cone reads a few blocks. */
static int grid_list_max = 4096;

int usim_grid_list_max(void)
{
    return grid_list_max;
}

int usim_test_grid_list_max(int n)
{
    int old = grid_list_max;
    grid_list_max = n;
    return old;
}

/* Group gi's placement: from the grid R (any group is placed as group 0), or
 * from its listed ranks. */
int usim_geometry(usim_net *net, const usim_coll *c, const rgrid *R, int gi, geo *G)
{
    memset(G, 0, sizeof *G);
    int P = c->size;
    if (R->on) {
        G->rg = R;
        G->uniform = 1;
        G->N = G->g = 1;
        for (int j = 0; j < R->nlo; j++)
            G->g *= R->n[R->lo[j]];
        for (int j = 0; j < R->nhi; j++)
            G->N *= R->n[R->hi[j]];
        if (P <= GRID_LIST_MAX) {
            if (!(G->pos = usim_malloc((size_t)P * sizeof *G->pos)))
                return usim_set_error(USIM_ENOMEM, "out of memory");
            for (int i = 0; i < P; i++)
                G->pos[i] = usim_grid_geo_pos(R, i / G->g, i % G->g);
        }
        return USIM_OK;
    }
    const int *ranks = c->ranks + (size_t)gi * P;
    int *node = usim_malloc((size_t)P * sizeof *node), *cnt = usim_calloc((size_t)P, sizeof *cnt);
    int *idx = usim_malloc((size_t)P * sizeof *idx);
    G->pos = usim_malloc((size_t)P * sizeof *G->pos);
    if (!node || !cnt || !idx || !G->pos) {
        free(node); free(cnt); free(idx); free(G->pos);
        G->pos = NULL;
        return usim_set_error(USIM_ENOMEM, "out of memory");
    }
    int N = 0, nn = usim_net_units(net, USIM_UNIT_DOMAIN);
    int *seen = usim_malloc((size_t)nn * sizeof *seen);   /* domain -> index of first appearance */
    if (!seen) {
        free(node); free(cnt); free(idx); free(G->pos);
        G->pos = NULL;
        return usim_set_error(USIM_ENOMEM, "out of memory");
    }
    for (int p = 0; p < P; p++)
        seen[usim_net_domain_of(net, ranks[p])] = -1;
    for (int p = 0; p < P; p++) {
        int nd = usim_net_domain_of(net, ranks[p]), k = seen[nd];
        if (k < 0)
            node[k = seen[nd] = N++] = nd;
        idx[p] = k;
        cnt[k]++;
    }
    free(seen);
    G->N = N;
    G->g = cnt[0];
    G->uniform = 1;
    for (int k = 0; k < N; k++)
        G->uniform &= cnt[k] == G->g;
    if (G->uniform) {
        memset(cnt, 0, (size_t)N * sizeof *cnt);
        for (int p = 0; p < P; p++)
            G->pos[idx[p] * G->g + cnt[idx[p]]++] = p;
    } else {
        G->g = P;    /* the tuner's convention for irregular groups */
        for (int p = 0; p < P; p++)
            G->pos[p] = p;
    }
    free(node); free(cnt); free(idx);
    return USIM_OK;
}
