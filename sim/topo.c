/* SPDX-License-Identifier: Apache-2.0 */
/*
 * topo.c -- the network's topology: a DGX-style arrangement of links, the
 * route of every GPU pair, and the units of GPUs that share links.  The
 * flows that share these links are in net.c (the object both halves fill
 * is in net_internal.h).
 *
 * Topology (G GPUs, g per node, D per NVLink domain, D a multiple of g):
 *   NVL_UP[gpu], NVL_DOWN[gpu]      GPU <-> NVSwitch, per direction
 *   NIC_TX[gpu], NIC_RX[gpu]        one NIC per GPU (rail-optimised), per direction
 *   SPINE_UP[node], SPINE_DOWN[node]  leaf -> spine, g * NIC / oversubscription
 *   MESH[gpu][peer]                 full-mesh nodes only: one link per ordered
 *                                   GPU pair of a node (g - 1 per GPU)
 * Route inside an NVLink domain: NVL_UP[src], NVL_DOWN[dst] (latency: NVLink);
 *   on a full-mesh node: MESH[src][dst] alone.  The domain is the node unless
 *   the platform's NVLink fabric spans several nodes (an NVL72 rack: D = 72,
 *   g = 4): then GPUs of different nodes of one domain still talk over NVLink
 *   and their traffic never touches a NIC.
 * Route across domains: NIC_TX[src], SPINE_UP, SPINE_DOWN, NIC_RX[dst] (latency: NIC).
 * Route latencies are the platform's latency_us, or during a collective's run
 * its step latencies (n->lat, set by usim_net_run_loads).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "usim.h"
#include "usim_internal.h"
#include "net_internal.h"

static int node_of(const usim_net *n, int g) { return g / n->gpn; }

static int domain_of(const usim_net *n, int g) { return g / n->dom; }

int usim_platform_domain(const usim_platform *p)
{
    return p->nvl_domain > p->gpus_per_node ? p->nvl_domain : p->gpus_per_node;
}

/* The GPU whose NIC links GPU g uses: the first of the GPUs sharing its NIC. */
static int nic_of(const usim_net *n, int g)
{
    int nics = n->p.nics_per_node > 0 && n->p.nics_per_node < n->gpn ? n->p.nics_per_node : n->gpn;
    int share = n->gpn / nics;
    return g - (g % n->gpn) % share;
}

/* The full-mesh link src -> dst (same node): GPU src's links to its g - 1
 * peers in local order, skipping itself. */
static int mesh_link(const usim_net *n, int src, int dst)
{
    int ls = src % n->gpn, ld = dst % n->gpn;
    return n->mesh_base + src * (n->gpn - 1) + ld - (ld > ls);
}

int usim_net_class(const usim_net *n, int src, int dst)
{
    if (src == USIM_SWITCH || dst == USIM_SWITCH || domain_of(n, src) == domain_of(n, dst))
        return USIM_CLASS_NVLINK;
    return USIM_CLASS_NIC;
}

int usim_net_route(const usim_net *n, int src, int dst, int *links, usim_time *lat, int *cls)
{
    int G = n->gpus;
    if (src == USIM_SWITCH || dst == USIM_SWITCH) {   /* NVLS: one leg through the NVSwitch */
        links[0] = src == USIM_SWITCH ? USIM_LINK_NVL_DOWN * G + dst : USIM_LINK_NVL_UP * G + src;
        *lat = n->lat[USIM_CLASS_NVLINK];
        *cls = USIM_CLASS_NVLINK;
        return 1;
    }
    if (domain_of(n, src) == domain_of(n, dst)) {
        *lat = n->lat[USIM_CLASS_NVLINK];
        *cls = USIM_CLASS_NVLINK;
        if (n->mesh_base >= 0) {   /* full mesh: the domain is the node */
            links[0] = mesh_link(n, src, dst);
            return 1;
        }
        links[0] = USIM_LINK_NVL_UP * G + src;
        links[1] = USIM_LINK_NVL_DOWN * G + dst;
        return 2;
    }
    int base = 4 * G;
    links[0] = USIM_LINK_NIC_TX * G + nic_of(n, src);
    links[1] = base + node_of(n, src);
    links[2] = base + n->nodes + node_of(n, dst);
    links[3] = USIM_LINK_NIC_RX * G + nic_of(n, dst);
    *lat = n->lat[USIM_CLASS_NIC];
    *cls = USIM_CLASS_NIC;
    return 4;
}

int usim_net_topo_init(usim_net *n, const usim_platform *p, int gpus)
{
    n->p = *p;
    n->gpus = gpus;
    if (p->gpus_per_node < 1 || (p->nvl_domain > 0 && p->nvl_domain % p->gpus_per_node != 0) ||
        (p->full_mesh && usim_platform_domain(p) != p->gpus_per_node) ||
        (p->full_mesh && !(usim_mesh_link_Bps(p) > 0)))
        return usim_set_error(USIM_EINVAL, "platform %s: the NVLink domain (%d GPUs) must be a multiple of the "
                              "%d GPUs per node, a full-mesh node is its own domain, and its links need a "
                              "positive bandwidth", p->name, p->nvl_domain, p->gpus_per_node);
    n->gpn = p->gpus_per_node < gpus ? p->gpus_per_node : gpus;
    n->dom = usim_platform_domain(p) < gpus ? usim_platform_domain(p) : gpus;
    n->nodes = (gpus + n->gpn - 1) / n->gpn;
    n->nlinks = 4 * gpus + 2 * n->nodes;
    n->mesh_base = -1;
    if (p->full_mesh && n->gpn > 1) {
        n->mesh_base = n->nlinks;
        n->nlinks += gpus * (n->gpn - 1);
    }
    n->bw_kind[0] = usim_nvl_Bps(p);
    n->bw_kind[1] = usim_nic_Bps(p);
    int nics = p->nics_per_node > 0 && p->nics_per_node < n->gpn ? p->nics_per_node : n->gpn;
    double spine = (double)nics * usim_nic_Bps(p) / (p->oversub >= 1 ? p->oversub : 1);
    n->bw_kind[2] = spine;
    n->bw_kind[3] = usim_mesh_link_Bps(p);
    return USIM_OK;
}

int usim_net_gpus(const usim_net *n) { return n->gpus; }

int usim_net_links(const usim_net *n) { return n->nlinks; }

const usim_platform *usim_net_platform(const usim_net *n) { return &n->p; }

int usim_net_node_of(const usim_net *n, int gpu) { return node_of(n, gpu); }

int usim_net_domain_of(const usim_net *n, int gpu) { return domain_of(n, gpu); }

int usim_net_full_mesh(const usim_net *n) { return n->mesh_base >= 0; }

int usim_net_units(const usim_net *n, int kind)
{
    return kind == USIM_UNIT_NODE ? n->nodes
         : kind == USIM_UNIT_DOMAIN ? (n->gpus + n->dom - 1) / n->dom : n->gpus;
}

int usim_net_unit(const usim_net *n, int kind, int gpu)
{
    return kind == USIM_UNIT_NODE ? node_of(n, gpu) : kind == USIM_UNIT_DOMAIN ? domain_of(n, gpu)
                                                                              : nic_of(n, gpu);
}

void usim_net_unit_range(const usim_net *n, int kind, int unit, int *first, int *count)
{
    int size;
    if (kind == USIM_UNIT_NIC) {
        int nics = n->p.nics_per_node > 0 && n->p.nics_per_node < n->gpn ? n->p.nics_per_node : n->gpn;
        *first = unit;
        size = nic_of(n, unit) == unit ? n->gpn / nics : 0;   /* not a NIC owner: no unit */
    } else {
        size = kind == USIM_UNIT_NODE ? n->gpn : n->dom;
        *first = unit * size;
    }
    *count = *first + size <= n->gpus ? size : n->gpus - *first;
}

int usim_net_link_users(const usim_net *n, int l, int *side, int *first, int *count)
{
    int G = n->gpus;
    if (n->mesh_base >= 0 && l >= n->mesh_base) {   /* one GPU pair's link */
        *side = 0;
        *first = (l - n->mesh_base) / (n->gpn - 1);
        *count = 1;
        return USIM_LINK_MESH;
    }
    int kind = l < 4 * G ? l / G : l < 4 * G + n->nodes ? USIM_LINK_SPINE_UP : USIM_LINK_SPINE_DOWN;
    *side = kind == USIM_LINK_NVL_DOWN || kind == USIM_LINK_NIC_RX || kind == USIM_LINK_SPINE_DOWN;
    switch (kind) {
    case USIM_LINK_NVL_UP: case USIM_LINK_NVL_DOWN:
        *first = l - kind * G;
        *count = 1;
        break;
    case USIM_LINK_NIC_TX: case USIM_LINK_NIC_RX:
        usim_net_unit_range(n, USIM_UNIT_NIC, l - kind * G, first, count);
        break;
    default:
        usim_net_unit_range(n, USIM_UNIT_NODE, (l - 4 * G) % n->nodes, first, count);
        break;
    }
    return kind;
}


