/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dist_shm.c -- where a Ulysses context's head-side buffers go (collective,
 * at creation): a shared-memory window when every rank is on one node and
 * the mode may use it (shm, cma, auto), with the flag areas of the
 * overlapped path through it and the cross-memory attach probe; private
 * memory otherwise, or when not every rank can afford the window.
 */
#include <stdio.h>
#include <string.h>

#include "dist_impl.h"

/* After the window is allocated: every rank's flag area, the own zeroed. */
static void ovs_place(uly_dist *D)
{
    if (!ovs_bytes(D))
        return;
    size_t lay[ULY_A2A_COUNT];
    for (int s = 0; s < D->P; s++)
        D->ovs.area[s] = D->shm.peer[s] + uly_dist_head_layout(D, s, lay);
    for (int i = 0; i < 2 * D->P + 2 * D->ovl.K; i++)
        uly_comm_shm_flag_init(D->ovs.area[D->rank] + (size_t)i * OVS_LINE);
    D->ovs.on = 1;
}

/* Whether the head-side buffers may go into a shared-memory window. */
int uly_dist_heads_shared(const uly_dist *D)
{
    return D->P > 1 && (D->a2a.mode == ULY_A2A_SHM || D->a2a.mode == ULY_A2A_CMA || D->a2a.mode == ULY_A2A_AUTO);
}

/* This rank's head-side buffers in its region at uly_dist_head_layout's offsets. */
void uly_dist_heads_set(uly_dist *D, char *region)
{
    size_t off[ULY_A2A_COUNT];
    uly_dist_head_layout(D, D->rank, off);
    void **slot[ULY_A2A_COUNT] = {&D->qh, &D->kh, &D->vh, &D->oh, &D->doh, &D->dqh, &D->dkh, &D->dvh};
    for (int w = 0; w < ULY_A2A_COUNT; w++)
        *slot[w] = region + off[w];
    D->shm.peer[D->rank] = region;
}

/* Address space the context still needs beside its window: the kernels'
 * workspace of one call (a local-attention plug-in's own is not known),
 * and ULY_WINDOW_SLACK for MPI and the threads. */
#define ULY_WINDOW_SLACK ((size_t)32 << 20)
static size_t heads_reserve(const uly_dist *D)
{
    size_t ws = 0;
    if (!D->o.attn && D->part.hc[D->rank] > 0) {
        uly_kernel_opts ko = local_opts(D);
        if (uly_attn_workspace(&D->a, &ko, &ws))
            ws = 0;
    }
    return ws > SIZE_MAX - ULY_WINDOW_SLACK ? SIZE_MAX : ws + ULY_WINDOW_SLACK;
}

/* Back to private head-side buffers after a window that not every rank
 * could have (collective: the window, where it exists, is freed). */
static void heads_unshare(uly_dist *D)
{
    uly_comm_shm_free(D->c);
    D->shm.on = 0;
    D->ovs.on = 0;
    D->a2a.ncand = 3;
    for (int s = 0; s < D->P; s++)
        D->shm.peer[s] = NULL;
    if (D->ovs.area)
        for (int s = 0; s < D->P; s++)
            D->ovs.area[s] = NULL;
}

/*
 * Where the head-side buffers go (collective, after the communicator is
 * attached).  With ULY_A2A_SHM or ULY_A2A_AUTO on P > 1 ranks that all share
 * one node: a shared-memory window, every rank's segment mapped in every
 * rank (auto then measures the shm mode too); ULY_A2A_SHM across nodes is
 * refused; ULY_A2A_AUTO across nodes allocates them privately.  A window
 * that not every rank can afford (/dev/shm space, address space; checked
 * before it is made, see uly_comm_shm_alloc) is ULY_EUNAVAIL for
 * ULY_A2A_SHM and ULY_A2A_CMA, the same message on every rank; ULY_A2A_AUTO
 * then allocates privately and says why (uly_dist_a2a_note).  The outcome
 * is agreed, so every rank returns the same status.
 */
int uly_dist_heads_place(uly_dist *D)
{
    if (!uly_dist_heads_shared(D))
        return ULY_OK; /* allocated in dist_alloc (or aliases with P = 1) */
    static const char *const names[1] = {"all ranks on one node (MPI_COMM_TYPE_SHARED)"};
    int one = 0;
    int local = uly_comm_one_node(D->c, &one);
    int64_t v = one;
    int rc = uly_comm_agree(D->c, local, 1, &v, names);
    if (rc)
        return rc;
    size_t lay[ULY_A2A_COUNT];
    const size_t hbytes = uly_dist_head_layout(D, D->rank, lay);
    int private = !one;
    if (one) {
        local = uly_comm_shm_alloc(D->c, hbytes + ovs_bytes(D), heads_reserve(D), D->shm.peer);
        if (!local) {
            D->shm.on = 1;
            D->a2a.ncand = 4; /* auto measures the shm mode too */
            uly_dist_heads_set(D, D->shm.peer[D->rank]);
            ovs_place(D);
        }
        int who = -1;
        const int st = uly_comm_agree_status(D->c, local, &who); /* the same on every rank */
        if (st == ULY_EUNAVAIL && D->a2a.mode == ULY_A2A_AUTO) {
            snprintf(D->a2a.note, sizeof D->a2a.note, "all-to-all: no shared-memory window (%s): auto falls back to pack, "
                     "datatype and pipeline", uly_last_error());
            heads_unshare(D);
            private = 1;
        } else if (st == ULY_EUNAVAIL) {
            char why[512];
            snprintf(why, sizeof why, "%s", uly_last_error());
            return uly_set_error(ULY_EUNAVAIL, "all-to-all mode %s: %s", uly_a2a_mode_name(D->a2a.mode), why);
        } else if (st) {
            char why[512];
            snprintf(why, sizeof why, "%s", uly_last_error());
            return who == D->rank ? uly_set_error(st, "%s", why)
                                  : uly_set_error(ULY_EPEER, "rank %d failed: %s", who, why);
        }
        local = ULY_OK;
    } else if (D->a2a.mode == ULY_A2A_SHM || D->a2a.mode == ULY_A2A_CMA) {
        local = uly_set_error(ULY_EINVAL, "all-to-all mode %s needs every rank on one node (%d ranks do not "
                              "all share memory); use pack, datatype, pipeline or auto",
                              uly_a2a_mode_name(D->a2a.mode), D->P);
        private = 0;
    }
    if (private) {
        if (!(D->shm.heads_owned = uly_malloc(hbytes)))
            local = uly_set_error(ULY_ENOMEM, "cannot allocate %zu bytes of head-sharded buffers", hbytes);
        else
            uly_dist_heads_set(D, D->shm.heads_owned);
    }
    rc = uly_comm_agree(D->c, local, 0, NULL, NULL);
    if (!rc && D->shm.on && D->a2a.mode != ULY_A2A_SHM) {
        /* cma (asked for, or measured by auto) if every rank can read every
         * other's memory; the outcome is agreed, so a failure anywhere
         * (EPERM under a ptrace policy, ENOSYS) makes every rank use shm */
        int usable = 0;
        rc = uly_comm_cma_probe(D->c, &usable);
        if (rc)
            return rc;
        if (usable) {
            D->shm.cma = 1;
            D->a2a.ncand = 5;
        } else {
            snprintf(D->a2a.note, sizeof D->a2a.note, "all-to-all mode cma unavailable (%s): %s", uly_last_error(),
                     D->a2a.mode == ULY_A2A_CMA ? "using shm" : "auto measures the others");
            if (D->a2a.mode == ULY_A2A_CMA)
                D->a2a.mode = ULY_A2A_SHM;
        }
    }
    if (!rc && D->shm.on) /* every rank has its window: agreements and flags through it from now on */
        uly_comm_shm_start(D->c);
    return rc;
}
