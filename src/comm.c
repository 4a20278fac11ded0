/* SPDX-License-Identifier: Apache-2.0 */
/*
 * comm.c -- the only code that calls MPI (and cross-memory attach).  See comm.h.
 */
#define _GNU_SOURCE /* process_vm_readv */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>
#ifdef HAVE_PROCESS_VM_READV
#include <sys/uio.h>
#endif

#include "comm.h"
#include "internal.h"

struct uly_comm {
    MPI_Comm comm;
    int rank, size;
    size_t max_count;
    int *icount[4];        /* scratch: int counts / displacements for MPI_Alltoallv */
    MPI_Datatype *types[2];
    MPI_Win win;           /* shared-memory window (uly_comm_shm_alloc), or MPI_WIN_NULL */
    /* the window's control blocks (see "shared-memory window" below) */
    char **ctl;            /* (P) every rank's control block, this process's mapping */
    int shm_on;            /* agreements and flags go through the control blocks */
    int shm_err;           /* first MPI_Win_sync failure of the flag functions */
    uint64_t ag_seq;       /* agreements so far (the same count on every rank) */
    uint64_t op_sub;       /* flag operations since the last agreement */
    int ag_pending;        /* the last agreement is published, not yet settled */
    int ag_local;          /* its local status */
    int ag_n;              /* its values */
    int64_t ag_vals[32];
    const char *const *ag_names;
    unsigned char *ag_peer; /* (P) 0: peer's slot not seen yet, 1: pair agrees, 2: it does not */
    int64_t *pid;          /* (P) every rank's process id (uly_comm_cma_probe), or NULL */
    void *iov;             /* 2 x cma_iov struct iovec: uly_comm_cma_read's lists */
    int cma_iov;           /* entries per list (IOV_MAX) */
    uint64_t shm_seg;      /* bytes of this rank's window segment (0: none) */
};

static int mpi_fail(int err, const char *what)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(err, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "error code %d", err);
    return uly_set_error(ULY_EMPI, "%s failed: %s", what, text);
}

#define MPI_TRY(call, what)                  \
    do {                                     \
        int e_ = (call);                     \
        if (e_ != MPI_SUCCESS)               \
            return mpi_fail(e_, what);       \
    } while (0)

int uly_comm_info(MPI_Comm user, int *rank, int *size)
{
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (!inited || finalized)
        return uly_set_error(ULY_EMPI, "MPI is not initialised (call MPI_Init first)");
    MPI_TRY(MPI_Comm_rank(user, rank), "MPI_Comm_rank");
    MPI_TRY(MPI_Comm_size(user, size), "MPI_Comm_size");
    return ULY_OK;
}

int uly_comm_alloc(int rank, int size, size_t max_count, uly_comm **out)
{
    *out = NULL;
    uly_comm *c = uly_calloc(1, sizeof *c);
    if (!c)
        return uly_set_error(ULY_ENOMEM, "cannot allocate the communicator context");
    c->comm = MPI_COMM_NULL;
    c->win = MPI_WIN_NULL;
    c->rank = rank;
    c->size = size;
    c->max_count = uly_comm_count_limit(max_count);
    int ok = 1;
    for (int i = 0; i < 4 && ok; i++)
        ok = (c->icount[i] = uly_calloc((size_t)size, sizeof(int))) != NULL;
    for (int i = 0; i < 2 && ok; i++)
        ok = (c->types[i] = uly_calloc((size_t)size, sizeof(MPI_Datatype))) != NULL;
    /* the shared-memory tables too: nothing may fail locally inside the collective uly_comm_shm_alloc */
    ok = ok && (c->ctl = uly_calloc((size_t)size, sizeof *c->ctl)) != NULL;
    ok = ok && (c->ag_peer = uly_calloc((size_t)size, 1)) != NULL;
    if (!ok) {
        uly_comm_close(c);
        return uly_set_error(ULY_ENOMEM, "cannot allocate per-rank count arrays for %d ranks", size);
    }
    *out = c;
    return ULY_OK;
}

int uly_comm_attach(uly_comm *c, MPI_Comm user)
{
    MPI_TRY(MPI_Comm_dup(user, &c->comm), "MPI_Comm_dup");
    MPI_TRY(MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    return ULY_OK;
}

void uly_comm_close(uly_comm *c)
{
    if (!c)
        return;
    uly_comm_shm_free(c);
    if (c->comm != MPI_COMM_NULL)
        MPI_Comm_free(&c->comm);
    for (int i = 0; i < 4; i++)
        uly_free(c->icount[i]);
    for (int i = 0; i < 2; i++)
        uly_free(c->types[i]);
    uly_free(c->ctl);
    uly_free(c->ag_peer);
    uly_free(c->pid);
    uly_free(c->iov);
    uly_free(c);
}

/* ------------------------------------------------- what is allocated */

void uly_comm_bufs(int P, uly_bufs *t)
{
    /* the context, then its per-rank arrays, as uly_comm_alloc calls uly_calloc */
    const uint64_t n = (uint64_t)P;
    uly_bufs_add(t, "communicator", sizeof(uly_comm) + 4 * n * sizeof(int) + 2 * n * sizeof(MPI_Datatype) +
                 n * sizeof(char *) + n, ULY_BUF_HEAP);
}

uint64_t uly_comm_nb_bytes(int cap)
{
    return (uint64_t)(cap > 0 ? cap : 1) * sizeof(MPI_Request);
}

size_t uly_comm_count_limit(size_t max_count)
{
    return max_count && max_count < INT_MAX ? max_count : INT_MAX;
}

int uly_comm_rank(const uly_comm *c) { return c->rank; }
int uly_comm_size(const uly_comm *c) { return c->size; }
double uly_comm_wtime(void) { return MPI_Wtime(); }

static int agree(MPI_Comm comm, int rank, int size, int local_status, int n, const int64_t *vals,
                 const char *const *names)
{
    /* One allreduce(MAX) over [v..., -v..., failed-rank marker]. */
    enum { MAXV = 32 };
    int64_t buf[2 * MAXV + 1], res[2 * MAXV + 1];
    if (n > MAXV)
        n = MAXV;
    for (int i = 0; i < n; i++) {
        buf[i] = vals[i];
        buf[n + i] = vals[i] == INT64_MIN ? INT64_MAX : -vals[i];
    }
    /* lowest failing rank wins: encode as size - rank (0 = nobody) */
    buf[2 * n] = local_status ? (int64_t)(size - rank) : 0;
    MPI_TRY(MPI_Allreduce(buf, res, 2 * n + 1, MPI_INT64_T, MPI_MAX, comm), "MPI_Allreduce (agreement)");
    if (res[2 * n] != 0) {
        int failed = size - (int)res[2 * n];
        char msg[512] = "";
        if (rank == failed)
            snprintf(msg, sizeof msg, "%s", uly_last_error());
        MPI_TRY(MPI_Bcast(msg, sizeof msg, MPI_CHAR, failed, comm), "MPI_Bcast (error message)");
        msg[sizeof msg - 1] = '\0';
        if (local_status)
            return local_status; /* keep this rank's own message */
        return uly_set_error(ULY_EPEER, "rank %d failed: %s", failed, msg);
    }
    for (int i = 0; i < n; i++) {
        int64_t mx = res[i], mn = -res[n + i];
        if (mx != mn)
            return uly_set_error(ULY_EMISMATCH, "ranks disagree on %s (values from %lld to %lld)",
                                 names[i], (long long)mn, (long long)mx);
    }
    return ULY_OK;
}

int uly_comm_agree(uly_comm *c, int local_status, int n, const int64_t *vals,
               const char *const *names)
{
    if (c->shm_on) { /* through the window's control blocks */
        int rc = uly_comm_agree_begin(c, local_status, n, vals, names);
        return rc ? rc : uly_comm_agree_end(c);
    }
    /* with a shared-memory window not started yet (its allocation being
     * agreed), the agreement also orders the ranks' accesses to it: every
     * access before it, on any rank, happens before every access after it
     * (Win_sync, a collective no rank leaves before all entered, Win_sync) */
    if (c->win != MPI_WIN_NULL) { /* a failure here still joins the agreement */
        int e = MPI_Win_sync(c->win);
        if (e != MPI_SUCCESS && !local_status)
            local_status = mpi_fail(e, "MPI_Win_sync");
    }
    int rc = agree(c->comm, c->rank, c->size, local_status, n, vals, names);
    if (c->win != MPI_WIN_NULL) {
        int e = MPI_Win_sync(c->win);
        if (e != MPI_SUCCESS && !rc)
            rc = mpi_fail(e, "MPI_Win_sync");
    }
    return rc;
}

int uly_comm_agree_on(MPI_Comm comm, int local_status, int n, const int64_t *vals,
                  const char *const *names)
{
    int rank, size;
    int rc = uly_comm_info(comm, &rank, &size);
    if (rc)
        return rc;
    return agree(comm, rank, size, local_status, n, vals, names);
}

/* A datatype covering n elements of `base` located at byte offset off. */
static int big_block_type(size_t n, MPI_Aint off, MPI_Datatype base, size_t es, size_t chunk,
                          MPI_Datatype *out)
{
    size_t q = n / chunk, rem = n % chunk;
    MPI_Datatype parts[2], tchunk = MPI_DATATYPE_NULL;
    int lens[2];
    MPI_Aint disp[2];
    int np = 0;
    if (q > 0) {
        if (q > INT_MAX)
            return uly_set_error(ULY_EOVERFLOW, "all-to-all block of %zu elements is too large", n);
        MPI_TRY(MPI_Type_contiguous((int)chunk, base, &tchunk), "MPI_Type_contiguous");
        parts[np] = tchunk;
        lens[np] = (int)q;
        disp[np] = off;
        np++;
    }
    if (rem > 0) {
        parts[np] = base;
        lens[np] = (int)rem;
        disp[np] = off + (MPI_Aint)(q * chunk * es);
        np++;
    }
    int e = MPI_Type_create_struct(np, lens, disp, parts, out);
    if (tchunk != MPI_DATATYPE_NULL)
        MPI_Type_free(&tchunk);
    if (e != MPI_SUCCESS)
        return mpi_fail(e, "MPI_Type_create_struct");
    MPI_TRY(MPI_Type_commit(out), "MPI_Type_commit");
    return ULY_OK;
}

static int alltoall_large(uly_comm *c, const void *sbuf, const size_t *scount, const size_t *sdispl,
                          void *rbuf, const size_t *rcount, const size_t *rdispl, size_t es,
                          MPI_Datatype base)
{
    const int P = c->size;
    int *sc = c->icount[0], *rc = c->icount[1], *zd = c->icount[2];
    MPI_Datatype *st = c->types[0], *rt = c->types[1];
    int rcode = ULY_OK;
    for (int s = 0; s < P; s++) {
        st[s] = rt[s] = MPI_DATATYPE_NULL;
        zd[s] = 0;
    }
    for (int s = 0; s < P && !rcode; s++) {
        sc[s] = scount[s] ? 1 : 0;
        rc[s] = rcount[s] ? 1 : 0;
        st[s] = rt[s] = base;
        if (scount[s])
            rcode = big_block_type(scount[s], (MPI_Aint)(sdispl[s] * es), base, es, c->max_count, &st[s]);
        if (!rcode && rcount[s])
            rcode = big_block_type(rcount[s], (MPI_Aint)(rdispl[s] * es), base, es, c->max_count, &rt[s]);
    }
    if (!rcode) {
        int e = MPI_Alltoallw(sbuf, sc, zd, st, rbuf, rc, zd, rt, c->comm);
        if (e != MPI_SUCCESS)
            rcode = mpi_fail(e, "MPI_Alltoallw");
    }
    for (int s = 0; s < P; s++) {
        if (st[s] != base && st[s] != MPI_DATATYPE_NULL)
            MPI_Type_free(&st[s]);
        if (rt[s] != base && rt[s] != MPI_DATATYPE_NULL)
            MPI_Type_free(&rt[s]);
    }
    return rcode;
}

int uly_comm_alltoallv(uly_comm *c, const void *sbuf, const size_t *scount, const size_t *sdispl,
                   void *rbuf, const size_t *rcount, const size_t *rdispl, size_t elem_size)
{
    const int P = c->size;
    if (P == 1)
        return ULY_OK;
    MPI_Datatype base = elem_size == 8 ? MPI_DOUBLE : MPI_FLOAT;
    int fits = 1;
    for (int s = 0; s < P; s++)
        if (scount[s] > c->max_count || rcount[s] > c->max_count || sdispl[s] > INT_MAX ||
            rdispl[s] > INT_MAX)
            fits = 0;
    if (!fits)
        return alltoall_large(c, sbuf, scount, sdispl, rbuf, rcount, rdispl, elem_size, base);
    int *sc = c->icount[0], *sd = c->icount[1], *rc = c->icount[2], *rd = c->icount[3];
    for (int s = 0; s < P; s++) {
        sc[s] = (int)scount[s];
        sd[s] = (int)sdispl[s];
        rc[s] = (int)rcount[s];
        rd[s] = (int)rdispl[s];
    }
    MPI_TRY(MPI_Alltoallv(sbuf, sc, sd, base, rbuf, rc, rd, base, c->comm), "MPI_Alltoallv");
    return ULY_OK;
}

/* Datatype of one strided block (see comm_block), positioned at its offset. */
static int block_type(const comm_block *b, MPI_Datatype base, size_t es, MPI_Datatype *out)
{
    if (b->rows > INT_MAX || b->len > INT_MAX || b->stride > INT_MAX || b->batches > INT_MAX)
        return uly_set_error(ULY_EOVERFLOW, "all-to-all block too large for a derived datatype");
    MPI_Datatype rows, batches;
    MPI_TRY(MPI_Type_vector((int)b->rows, (int)b->len, (int)b->stride, base, &rows), "MPI_Type_vector");
    int e = MPI_Type_create_hvector((int)b->batches, 1, (MPI_Aint)(b->bstride * es), rows, &batches);
    MPI_Type_free(&rows);
    if (e != MPI_SUCCESS)
        return mpi_fail(e, "MPI_Type_create_hvector");
    int one = 1;
    MPI_Aint disp = (MPI_Aint)(b->off * es);
    e = MPI_Type_create_struct(1, &one, &disp, &batches, out);
    MPI_Type_free(&batches);
    if (e != MPI_SUCCESS)
        return mpi_fail(e, "MPI_Type_create_struct");
    MPI_TRY(MPI_Type_commit(out), "MPI_Type_commit");
    return ULY_OK;
}

int uly_comm_alltoallw_blocks(uly_comm *c, const void *sbuf, const comm_block *sb, void *rbuf,
                          const comm_block *rb, size_t elem_size)
{
    const int P = c->size;
    if (P == 1)
        return ULY_OK;
    MPI_Datatype base = elem_size == 8 ? MPI_DOUBLE : MPI_FLOAT;
    int *sc = c->icount[0], *rc = c->icount[1], *zd = c->icount[2];
    MPI_Datatype *st = c->types[0], *rt = c->types[1];
    int code = ULY_OK;
    for (int s = 0; s < P; s++) {
        st[s] = rt[s] = base;
        zd[s] = 0;
        sc[s] = rc[s] = 0;
    }
    for (int s = 0; s < P && !code; s++) {
        if (sb[s].rows && sb[s].len && sb[s].batches) {
            code = block_type(&sb[s], base, elem_size, &st[s]);
            sc[s] = 1;
        }
        if (!code && rb[s].rows && rb[s].len && rb[s].batches) {
            code = block_type(&rb[s], base, elem_size, &rt[s]);
            rc[s] = 1;
        }
    }
    if (!code) {
        int e = MPI_Alltoallw(sbuf, sc, zd, st, rbuf, rc, zd, rt, c->comm);
        if (e != MPI_SUCCESS)
            code = mpi_fail(e, "MPI_Alltoallw");
    }
    for (int s = 0; s < P; s++) {
        if (st[s] != base)
            MPI_Type_free(&st[s]);
        if (rt[s] != base)
            MPI_Type_free(&rt[s]);
    }
    return code;
}

/* Post the requests moving n elements between this rank and peer, in
 * pieces of at most max_count elements (MPI keeps their order). */
static int post_pieces(uly_comm *c, int recv, char *buf, size_t n, size_t es, MPI_Datatype base, int peer,
                       MPI_Request *req, int *nreq, int *owner)
{
    for (size_t done = 0; done < n;) {
        size_t k = n - done < c->max_count ? n - done : c->max_count;
        int e = recv ? MPI_Irecv(buf + done * es, (int)k, base, peer, ULY_COMM_TAG_A2A, c->comm, &req[*nreq])
                     : MPI_Isend(buf + done * es, (int)k, base, peer, ULY_COMM_TAG_A2A, c->comm, &req[*nreq]);
        if (e != MPI_SUCCESS)
            return mpi_fail(e, recv ? "MPI_Irecv" : "MPI_Isend");
        owner[*nreq] = peer;
        (*nreq)++;
        done += k;
    }
    return ULY_OK;
}

int uly_comm_alltoall_pipelined(uly_comm *c, const void *sbuf, const size_t *scount, const size_t *sdispl,
                                void *rbuf, const size_t *rcount, const size_t *rdispl, size_t elem_size,
                                void (*pack)(void *user, int peer), void (*unpack)(void *user, int peer),
                                void *user, const uly_comm_pipe_ws *ws)
{
    const int P = c->size, r = c->rank;
    if (P == 1)
        return ULY_OK;
    MPI_Datatype base = elem_size == 8 ? MPI_DOUBLE : MPI_FLOAT;
    size_t nr = 0, ns = 0;
    for (int s = 0; s < P; s++) {
        if (s == r)
            continue;
        nr += (rcount[s] + c->max_count - 1) / c->max_count;
        ns += (scount[s] + c->max_count - 1) / c->max_count;
    }
    if (nr + ns > (size_t)INT_MAX / 2)
        return uly_set_error(ULY_EOVERFLOW, "all-to-all needs too many messages (%zu)", nr + ns);
    if (!ws || nr + ns > ws->cap)
        return uly_set_error(ULY_EINVAL, "pipelined all-to-all: %zu messages, request tables for %zu", nr + ns,
                             ws ? ws->cap : 0);
    MPI_Request *req = ws->req;
    int *owner = ws->owner;
    int *left = ws->left; /* receive pieces outstanding per peer */
    memset(left, 0, (size_t)P * sizeof *left);
    int n_r = 0, n_all = 0, code = ULY_OK;
    /* every receive first, so that each send finds its receive posted */
    for (int i = 1; i < P && !code; i++) {
        const int s = (r - i + P) % P;
        code = post_pieces(c, 1, (char *)rbuf + rdispl[s] * elem_size, rcount[s], elem_size, base, s, req, &n_r,
                           owner);
        left[s] = 0;
        for (int x = 0; x < n_r; x++)
            left[s] += owner[x] == s;
    }
    n_all = n_r;
    /* then, peer by peer (r+1, r+2, ...), pack its block and start its send:
     * the pack of the next peer runs while the previous block is in flight */
    for (int i = 1; i < P && !code; i++) {
        const int s = (r + i) % P;
        if (!scount[s])
            continue;
        if (pack)
            pack(user, s);
        code = post_pieces(c, 0, (char *)sbuf + sdispl[s] * elem_size, scount[s], elem_size, base, s, req, &n_all,
                           owner);
    }
    /* unpack each peer's block as soon as all its pieces have arrived */
    for (int done = 0; done < n_r && !code;) {
        int idx = MPI_UNDEFINED;
        int e = MPI_Waitany(n_r, req, &idx, MPI_STATUS_IGNORE);
        if (e != MPI_SUCCESS) {
            code = mpi_fail(e, "MPI_Waitany");
            break;
        }
        if (idx == MPI_UNDEFINED)
            break;
        done++;
        if (--left[owner[idx]] == 0 && unpack)
            unpack(user, owner[idx]);
    }
    if (!code && n_all > n_r) {
        int e = MPI_Waitall(n_all - n_r, req + n_r, MPI_STATUSES_IGNORE);
        if (e != MPI_SUCCESS)
            code = mpi_fail(e, "MPI_Waitall");
    }
    if (code) /* do not leave requests behind on the error path */
        for (int x = 0; x < n_all; x++)
            if (req[x] != MPI_REQUEST_NULL) {
                MPI_Cancel(&req[x]);
                MPI_Request_free(&req[x]);
            }
    return code;
}

size_t uly_comm_pipe_requests(int P, size_t block, size_t lim)
{
    const size_t pieces = block ? (block + lim - 1) / lim : 1;
    if (P < 2)
        return 0;
    if (pieces > (SIZE_MAX - 1) / 2 / (size_t)(P - 1))
        return SIZE_MAX;
    return 2 * (size_t)(P - 1) * pieces;
}

/* ------------------------------------------------- non-blocking pieces */

int uly_comm_nb_init(uly_comm_nb *q, int cap)
{
    q->n = 0;
    q->cap = cap > 0 ? cap : 1;
    q->req = uly_malloc((size_t)q->cap * sizeof *q->req);
    if (!q->req) {
        q->cap = 0;
        return uly_set_error(ULY_ENOMEM, "cannot allocate %d request handles", cap);
    }
    return ULY_OK;
}

void uly_comm_nb_free(uly_comm_nb *q)
{
    for (int x = 0; x < q->n; x++)
        if (q->req[x] != MPI_REQUEST_NULL) {
            MPI_Cancel(&q->req[x]);
            MPI_Request_free(&q->req[x]);
        }
    uly_free(q->req);
    q->req = NULL;
    q->n = q->cap = 0;
}

size_t uly_comm_nb_pieces(const uly_comm *c, size_t n)
{
    return (n + c->max_count - 1) / c->max_count;
}

int uly_comm_nb_post(uly_comm *c, uly_comm_nb *q, int recv, void *buf, size_t n, size_t elem_size, int peer,
                     int tag)
{
    if (uly_comm_nb_pieces(c, n) > (size_t)(q->cap - q->n))
        return uly_set_error(ULY_EOVERFLOW, "non-blocking all-to-all: more than %d messages outstanding", q->cap);
    MPI_Datatype base = elem_size == 8 ? MPI_DOUBLE : MPI_FLOAT;
    for (size_t done = 0; done < n;) {
        size_t k = n - done < c->max_count ? n - done : c->max_count;
        char *p = (char *)buf + done * elem_size;
        int e = recv ? MPI_Irecv(p, (int)k, base, peer, tag, c->comm, &q->req[q->n])
                     : MPI_Isend(p, (int)k, base, peer, tag, c->comm, &q->req[q->n]);
        if (e != MPI_SUCCESS)
            return mpi_fail(e, recv ? "MPI_Irecv" : "MPI_Isend");
        q->n++;
        done += k;
    }
    return ULY_OK;
}

int uly_comm_nb_test(uly_comm_nb *q, int *done)
{
    int flag = 1;
    if (q->n > 0) {
        int e = MPI_Testall(q->n, q->req, &flag, MPI_STATUSES_IGNORE);
        if (e != MPI_SUCCESS)
            return mpi_fail(e, "MPI_Testall");
        if (flag)
            q->n = 0;
    }
    *done = flag;
    return ULY_OK;
}

int uly_comm_nb_wait(uly_comm_nb *q)
{
    if (q->n == 0)
        return ULY_OK;
    int e = MPI_Waitall(q->n, q->req, MPI_STATUSES_IGNORE);
    if (e != MPI_SUCCESS)
        return mpi_fail(e, "MPI_Waitall");
    q->n = 0;
    return ULY_OK;
}

int uly_comm_nb_wait_some(uly_comm_nb *q, int first, int n)
{
    if (first >= q->n || n <= 0)
        return ULY_OK; /* completed by a test that emptied q */
    if (n > q->n - first)
        n = q->n - first;
    int e = MPI_Waitall(n, q->req + first, MPI_STATUSES_IGNORE);
    if (e != MPI_SUCCESS)
        return mpi_fail(e, "MPI_Waitall");
    return ULY_OK;
}

int uly_comm_nb_test_some(uly_comm_nb *q, int first, int n, int *done)
{
    *done = 1;
    if (first >= q->n || n <= 0)
        return ULY_OK;
    if (n > q->n - first)
        n = q->n - first;
    int e = MPI_Testall(n, q->req + first, done, MPI_STATUSES_IGNORE);
    if (e != MPI_SUCCESS)
        return mpi_fail(e, "MPI_Testall");
    return ULY_OK;
}

int uly_comm_max_over_ranks(uly_comm *c, double *x, int n)
{
    MPI_TRY(MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_DOUBLE, MPI_MAX, c->comm), "MPI_Allreduce (max)");
    return ULY_OK;
}

/* ------------------------------------------------- shared-memory window */

int uly_comm_one_node(uly_comm *c, int *one_node)
{
    MPI_Comm node = MPI_COMM_NULL;
    int n = 0;
    *one_node = 0;
    MPI_TRY(MPI_Comm_split_type(c->comm, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &node),
            "MPI_Comm_split_type (shared memory)");
    int e = MPI_Comm_size(node, &n);
    MPI_Comm_free(&node);
    if (e != MPI_SUCCESS)
        return mpi_fail(e, "MPI_Comm_size");
    *one_node = n == c->size;
    return ULY_OK;
}

/*
 * Control blocks.  Each rank's segment of the window starts with its control
 * block, written by the ranks as described here, and the caller's `bytes`
 * follow it:
 *   slot[2]  the rank's agreements (status, values, the failure message),
 *            published by setting seq to the agreement's number; two slots
 *            by parity, because a rank can publish agreement k + 1 while a
 *            peer still reads its slot of agreement k, but not k + 2 (it
 *            settles k + 1 first, which needs that peer's slot k + 1, which
 *            the peer publishes after settling k);
 *   ready    the rank's buffers may be accessed by the peers for operation v
 *            (uly_comm_shm_ready), with the address of the buffer the peers
 *            read by cross-memory attach (uly_comm_shm_ready_at);
 *   from[s]  peer s is done with this rank's buffers for operation v
 *            (uly_comm_shm_done), and failed for v if bad == v (its message
 *            in its own control block's msg).
 * Every field is written by one rank only, flags hold increasing values, so
 * nothing is ever reset.  Flags are C11 atomics (lock-free, so valid between
 * processes sharing the memory): a release store after MPI_Win_sync on the
 * writing side, an acquire load followed by MPI_Win_sync on the reading side
 * (MPI-3.1 section 11.7: in the unified model MPI_Win_sync plus a process
 * synchronisation order the window's loads and stores; here the flag is the
 * synchronisation).  Waiting loops call sched_yield: ranks may outnumber
 * the cores.
 */
enum { SHM_MAXV = 32, SHM_MSG = 512, SHM_LINE = 64 };

typedef struct shm_slot {
    _Alignas(SHM_LINE) _Atomic uint64_t seq;
    int64_t status;        /* 0: ok; otherwise this rank failed (message in msg) */
    int64_t n;
    int64_t vals[SHM_MAXV];
    char msg[SHM_MSG];
} shm_slot;

typedef struct shm_flag {
    _Alignas(SHM_LINE) _Atomic uint64_t v;
    uint64_t addr; /* ready: the buffer's address in its owner's process (written before v) */
    uint64_t bad;  /* from[s]: the operation for which peer s failed (written before v) */
} shm_flag;

typedef struct shm_ctl {
    shm_slot slot[2];
    char msg[SHM_MSG]; /* this rank's last failure in an exchange (uly_comm_shm_done_failed) */
    shm_flag ready;
    shm_flag from[]; /* (P) */
} shm_ctl;

static size_t ctl_bytes(int P)
{
    return (sizeof(shm_ctl) + (size_t)P * sizeof(shm_flag) + SHM_LINE - 1) / SHM_LINE * SHM_LINE;
}

static shm_ctl *ctl_of(const uly_comm *c, int s)
{
    return (shm_ctl *)(void *)c->ctl[s];
}

static void shm_sync_window(uly_comm *c)
{
    int e = MPI_Win_sync(c->win);
    if (e != MPI_SUCCESS && !c->shm_err)
        c->shm_err = mpi_fail(e, "MPI_Win_sync");
}

/*
 * What a window costs, checked before MPI_Win_allocate_shared.  Open MPI's
 * osc/sm (4.x, 5.x) puts the whole window in one file of its backing
 * directory (osc_sm_backing_directory, /dev/shm by default), created by
 * rank 0 and mapped whole by every rank: the segments rounded to pages, a
 * page, and a small state per rank.  Inside that call a rank that fails
 * (the file system full, a mapping refused by RLIMIT_AS) returns while its
 * peers wait in the call's collectives for ever, and the file it made stays
 * behind; so every rank checks first that the call cannot fail for want of
 * space, and the ranks agree before any of them calls it.
 */
static const char *shm_backing_dir(void)
{
    const char *d = getenv("OMPI_MCA_osc_sm_backing_directory");
    if (d && *d)
        return d;
    if (access("/dev/shm", W_OK) == 0)
        return "/dev/shm";
    d = getenv("TMPDIR"); /* Open MPI's session directory, under the temporary directory */
    return d && *d ? d : "/tmp";
}

/* Whether this process can afford a window file of `file` bytes (P segments)
 * and `reserve` bytes more of address space: ULY_OK or ULY_EUNAVAIL. */
static int shm_affordable(const uly_comm *c, uint64_t file, uint64_t reserve)
{
    char a[32], b[32], r[32];
    const char *dir = shm_backing_dir();
    struct statvfs fs;
    if (statvfs(dir, &fs) == 0) {
        const uint64_t free_b = (uint64_t)fs.f_bavail * (uint64_t)fs.f_frsize;
        if (file > free_b)
            return uly_set_error(ULY_EUNAVAIL, "the shared-memory window needs %s in %s (%d segments, one per "
                                 "rank) but %s has %s free", uly_fmt_bytes(a, sizeof a, file), dir, c->size, dir,
                                 uly_fmt_bytes(b, sizeof b, free_b));
    }
    const uint64_t left = uly_rlimit_left(RLIMIT_AS, uly_proc_kb("/proc/self/status", "VmSize"));
    if (left != UINT64_MAX && (file > left || reserve > left - file))
        return uly_set_error(ULY_EUNAVAIL, "rank %d can map %s more (RLIMIT_AS, ulimit -v, less the address space "
                             "in use) but every rank maps the whole shared-memory window, %s (%d segments), and needs "
                             "%s beside it", c->rank, uly_fmt_bytes(a, sizeof a, left),
                             uly_fmt_bytes(b, sizeof b, file), c->size, uly_fmt_bytes(r, sizeof r, reserve));
    return ULY_OK;
}

int uly_comm_agree_status(uly_comm *c, int local_status, int *failed)
{
    *failed = -1;
    int64_t key = local_status ? (int64_t)(c->size - c->rank) : 0, res = 0;
    MPI_TRY(MPI_Allreduce(&key, &res, 1, MPI_INT64_T, MPI_MAX, c->comm), "MPI_Allreduce (agreement)");
    if (res == 0)
        return ULY_OK;
    const int from = c->size - (int)res;
    struct {
        int64_t status;
        char msg[SHM_MSG];
    } m;
    memset(&m, 0, sizeof m);
    if (c->rank == from) {
        m.status = local_status;
        snprintf(m.msg, sizeof m.msg, "%s", uly_last_error());
    }
    MPI_TRY(MPI_Bcast(&m, (int)sizeof m, MPI_BYTE, from, c->comm), "MPI_Bcast (error message)");
    m.msg[sizeof m.msg - 1] = '\0';
    *failed = from;
    const int st = m.status > ULY_OK && m.status < ULY_NSTATUS ? (int)m.status : ULY_EMPI;
    return uly_set_error(st, "%s", m.msg);
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

int uly_comm_shm_alloc(uly_comm *c, size_t bytes, size_t reserve, char **base)
{
    _Atomic uint64_t probe;
    int local = ULY_OK;
    if (!atomic_is_lock_free(&probe))
        local = uly_set_error(ULY_EMPI, "64-bit atomics are not lock-free here: no shared-memory flags");
    const size_t head = ctl_bytes(c->size);
    const long pg = sysconf(_SC_PAGESIZE);
    const uint64_t page = pg > 0 ? (uint64_t)pg : 4096;
    /* + SHM_LINE: segments may start anywhere (8 bytes apart here); the
     * control block starts at the first line boundary, at the same offset
     * in every process (the mappings are page-aligned) */
    const uint64_t seg = uly_comm_shm_extra(c->size) + bytes;
    const uint64_t cap = (UINT64_MAX / 2) / (uint64_t)c->size; /* saturating: a sum that cannot be had */
    uint64_t mine = seg > cap ? cap : (seg + page - 1) / page * page, sum = 0;
    MPI_TRY(MPI_Allreduce(&mine, &sum, 1, MPI_UINT64_T, MPI_SUM, c->comm), "MPI_Allreduce (window size)");
    /* the segments, a page, and osc/sm's per-rank state (a page per rank is ample) */
    const uint64_t file = sum + (uint64_t)(c->size + 2) * page;
    if (!local)
        local = shm_affordable(c, file, reserve);
    int who;
    int rc = uly_comm_agree_status(c, local, &who);
    if (rc)
        return rc; /* no rank calls MPI_Win_allocate_shared: nothing to clean up */
    MPI_Info info;
    MPI_TRY(MPI_Info_create(&info), "MPI_Info_create");
    /* each rank's segment on its own pages (and NUMA node, first touch) */
    MPI_Info_set(info, "alloc_shared_noncontig", "true");
    void *mine_p = NULL;
    int e = MPI_Win_allocate_shared((MPI_Aint)seg, 1, info, c->comm, &mine_p, &c->win);
    MPI_Info_free(&info);
    if (e != MPI_SUCCESS) {
        c->win = MPI_WIN_NULL;
        return mpi_fail(e, "MPI_Win_allocate_shared");
    }
    c->shm_seg = seg;
    MPI_TRY(MPI_Win_set_errhandler(c->win, MPI_ERRORS_RETURN), "MPI_Win_set_errhandler");
    /* direct loads and stores need the unified memory model */
    int *model = NULL, found = 0;
    MPI_TRY(MPI_Win_get_attr(c->win, MPI_WIN_MODEL, &model, &found), "MPI_Win_get_attr");
    if (!found || *model != MPI_WIN_UNIFIED)
        return uly_set_error(ULY_EMPI, "the MPI library's shared-memory window is not in the unified memory model");
    for (int s = 0; s < c->size; s++) {
        MPI_Aint size = 0;
        int unit = 0;
        void *p = NULL;
        MPI_TRY(MPI_Win_shared_query(c->win, s, &size, &unit, &p), "MPI_Win_shared_query");
        c->ctl[s] = (char *)p + ((SHM_LINE - (uintptr_t)p % SHM_LINE) % SHM_LINE);
        base[s] = c->ctl[s] + head;
    }
    /* The file is sparse: its pages are taken from the file system at the
     * first write, where a full one raises SIGBUS (another window, or any
     * other user of it, may have taken the space since the check).  Each
     * rank takes its own segment's pages now, first touch by their owner,
     * and a refusal becomes this rank's failure (EFAULT: the file system
     * is full; older kernels without MADV_POPULATE_WRITE: EINVAL, skipped). */
    const uintptr_t lo = (uintptr_t)mine_p / page * page, hi = ((uintptr_t)mine_p + seg + page - 1) / page * page;
    if (seg && madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE) != 0 && errno != EINVAL) {
        char a[32];
        return uly_set_error(ULY_EUNAVAIL, "rank %d cannot get the pages of its %s of the shared-memory window in "
                             "%s: %s", c->rank, uly_fmt_bytes(a, sizeof a, seg), shm_backing_dir(),
                             errno == EFAULT ? "the file system is full" : strerror(errno));
    }
    /* the own control block starts at zero; the caller's agreement that
     * follows (MPI, bracketed by Win_sync) publishes it before any use */
    shm_ctl *me = ctl_of(c, c->rank);
    for (int i = 0; i < 2; i++)
        atomic_init(&me->slot[i].seq, 0);
    atomic_init(&me->ready.v, 0);
    me->ready.addr = 0;
    for (int s = 0; s < c->size; s++) {
        atomic_init(&me->from[s].v, 0);
        me->from[s].bad = 0;
    }
    /* one passive-target epoch for the window's lifetime: MPI_Win_sync is
     * valid inside it */
    MPI_TRY(MPI_Win_lock_all(MPI_MODE_NOCHECK, c->win), "MPI_Win_lock_all");
    return ULY_OK;
}

void uly_comm_shm_start(uly_comm *c)
{
    c->shm_on = c->win != MPI_WIN_NULL;
}

void uly_comm_shm_pause(void)
{
    sched_yield();
}

int uly_comm_agree_begin(uly_comm *c, int local_status, int n, const int64_t *vals, const char *const *names)
{
    if (!c->shm_on)
        return uly_comm_agree(c, local_status, n, vals, names);
    if (c->ag_pending) /* never two open at once: settle the last one first */
        (void)uly_comm_agree_end(c);
    if (n > SHM_MAXV)
        n = SHM_MAXV;
    c->ag_seq++;
    c->op_sub = 0;
    c->ag_local = local_status;
    c->ag_n = n;
    c->ag_names = names;
    for (int i = 0; i < n; i++)
        c->ag_vals[i] = vals[i];
    memset(c->ag_peer, 0, (size_t)c->size);
    shm_slot *sl = &ctl_of(c, c->rank)->slot[c->ag_seq & 1];
    sl->status = local_status != 0;
    sl->n = n;
    for (int i = 0; i < n; i++)
        sl->vals[i] = vals[i];
    if (local_status)
        snprintf(sl->msg, sizeof sl->msg, "%s", uly_last_error());
    shm_sync_window(c); /* every earlier access of this rank first */
    atomic_store_explicit(&sl->seq, c->ag_seq, memory_order_release);
    c->ag_pending = 1;
    /* a rank that failed touches no buffer: it settles at once (the others
     * see its status and leave it out of every exchange) */
    return local_status ? uly_comm_agree_end(c) : ULY_OK;
}

/* Peer s's slot of the pending agreement, or NULL if not published yet. */
static const shm_slot *peer_slot(uly_comm *c, int s)
{
    const shm_slot *sl = &ctl_of(c, s)->slot[c->ag_seq & 1];
    if (atomic_load_explicit(&sl->seq, memory_order_acquire) < c->ag_seq)
        return NULL;
    shm_sync_window(c);
    return sl;
}

int uly_comm_agree_peer(uly_comm *c, int s)
{
    if (!c->ag_pending)
        return 1;
    if (!c->ag_peer[s]) {
        const shm_slot *sl = peer_slot(c, s);
        if (!sl)
            return -1;
        int same = !sl->status && !c->ag_local && sl->n == c->ag_n;
        for (int i = 0; i < c->ag_n && same; i++)
            same = sl->vals[i] == c->ag_vals[i];
        c->ag_peer[s] = same ? 1 : 2;
    }
    return c->ag_peer[s] == 1;
}

int uly_comm_agree_end(uly_comm *c)
{
    if (!c->ag_pending)
        return ULY_OK;
    const int P = c->size, n = c->ag_n;
    int failed = -1, odd = -1, odd_n = 0;
    int64_t mx[SHM_MAXV], mn[SHM_MAXV];
    for (int i = 0; i < n; i++)
        mx[i] = mn[i] = c->ag_vals[i];
    for (int s = 0; s < P; s++) {
        const shm_slot *sl;
        while (!(sl = peer_slot(c, s)))
            sched_yield();
        if (sl->status && failed < 0)
            failed = s;
        for (int i = 0; i < n && i < sl->n; i++) {
            mx[i] = sl->vals[i] > mx[i] ? sl->vals[i] : mx[i];
            mn[i] = sl->vals[i] < mn[i] ? sl->vals[i] : mn[i];
        }
        if (sl->n != n && odd < 0) /* a different agreement altogether */
            odd = s, odd_n = (int)sl->n;
    }
    /* every slot seen: only now may this rank publish its next agreement */
    c->ag_pending = 0;
    if (failed >= 0) {
        if (c->ag_local)
            return c->ag_local; /* keep this rank's own message */
        char msg[SHM_MSG];
        snprintf(msg, sizeof msg, "%s", ctl_of(c, failed)->slot[c->ag_seq & 1].msg);
        return uly_set_error(ULY_EPEER, "rank %d failed: %s", failed, msg);
    }
    if (odd >= 0)
        return uly_set_error(ULY_EMISMATCH, "ranks disagree on the agreement itself (%d values on rank %d, %d here)",
                             odd_n, odd, n);
    for (int i = 0; i < n; i++)
        if (mx[i] != mn[i])
            return uly_set_error(ULY_EMISMATCH, "ranks disagree on %s (values from %lld to %lld)", c->ag_names[i],
                                 (long long)mn[i], (long long)mx[i]);
    if (c->shm_err) {
        int e = c->shm_err;
        c->shm_err = 0;
        return e;
    }
    return ULY_OK;
}

uint64_t uly_comm_shm_op(uly_comm *c)
{
    return (c->ag_seq << 16) | ++c->op_sub;
}

void uly_comm_shm_ready(uly_comm *c, uint64_t v)
{
    uly_comm_shm_ready_at(c, v, NULL);
}

void uly_comm_shm_ready_at(uly_comm *c, uint64_t v, const void *addr)
{
    ctl_of(c, c->rank)->ready.addr = (uint64_t)(uintptr_t)addr;
    shm_sync_window(c);
    atomic_store_explicit(&ctl_of(c, c->rank)->ready.v, v, memory_order_release);
}

uint64_t uly_comm_shm_peer_addr(uly_comm *c, int s)
{
    return ctl_of(c, s)->ready.addr;
}

int uly_comm_shm_is_ready(uly_comm *c, int s, uint64_t v)
{
    if (atomic_load_explicit(&ctl_of(c, s)->ready.v, memory_order_acquire) < v)
        return 0;
    shm_sync_window(c);
    return 1;
}

void uly_comm_shm_done(uly_comm *c, int s, uint64_t v)
{
    shm_sync_window(c);
    atomic_store_explicit(&ctl_of(c, s)->from[c->rank].v, v, memory_order_release);
}

void uly_comm_shm_done_failed(uly_comm *c, int s, uint64_t v, const char *msg)
{
    if (msg) {
        char *mine = ctl_of(c, c->rank)->msg;
        if (mine != msg)
            snprintf(mine, SHM_MSG, "%s", msg);
        ctl_of(c, s)->from[c->rank].bad = v;
    }
    uly_comm_shm_done(c, s, v);
}

int uly_comm_shm_peer_failed(uly_comm *c, int s, uint64_t v)
{
    if (ctl_of(c, c->rank)->from[s].bad != v)
        return ULY_OK;
    char msg[SHM_MSG];
    snprintf(msg, sizeof msg, "%s", ctl_of(c, s)->msg);
    return uly_set_error(ULY_EPEER, "rank %d failed: %s", s, msg);
}

int uly_comm_shm_is_done(uly_comm *c, int s, uint64_t v)
{
    if (atomic_load_explicit(&ctl_of(c, c->rank)->from[s].v, memory_order_acquire) < v)
        return 0;
    shm_sync_window(c);
    return 1;
}

int uly_comm_shm_error(uly_comm *c)
{
    int e = c->shm_err;
    c->shm_err = 0;
    return e;
}

void uly_comm_shm_flag_init(void *flag)
{
    atomic_init((_Atomic uint64_t *)flag, 0);
}

void uly_comm_shm_flag_set(uly_comm *c, void *flag, uint64_t v)
{
    shm_sync_window(c);
    atomic_store_explicit((_Atomic uint64_t *)flag, v, memory_order_release);
}

int uly_comm_shm_flag_reached(uly_comm *c, const void *flag, uint64_t v)
{
    if (atomic_load_explicit((_Atomic uint64_t *)(uintptr_t)flag, memory_order_acquire) < v)
        return 0;
    shm_sync_window(c);
    return 1;
}

void uly_comm_shm_free(uly_comm *c)
{
    if (c->win == MPI_WIN_NULL)
        return;
    MPI_Win_unlock_all(c->win); /* an error here means the epoch was never opened */
    MPI_Win_free(&c->win);
    c->win = MPI_WIN_NULL;
    c->shm_on = 0;
    c->shm_seg = 0;
}

uint64_t uly_comm_shm_extra(int P)
{
    /* + SHM_LINE: segments may start anywhere (8 bytes apart here); the
     * control block starts at the first line boundary, at the same offset
     * in every process (the mappings are page-aligned) */
    return (uint64_t)SHM_LINE + ctl_bytes(P);
}

uint64_t uly_comm_shm_segment(const uly_comm *c)
{
    return c->win == MPI_WIN_NULL ? 0 : c->shm_seg;
}

/* ------------------------------------------------- cross-memory attach */

/* Tests: when nonzero, every cross-memory read of this process fails with
 * this errno, as under a ptrace policy that forbids it.  Exported with the
 * uly_ prefix but not in the public header. */
void uly_test_cma_errno(int e);
static int cma_test_errno;
void uly_test_cma_errno(int e) { cma_test_errno = e; }

/* One process_vm_readv, or the test's failure. */
static long cma_readv(int64_t pid, const void *lv, unsigned long ln, const void *rv, unsigned long rn)
{
    if (cma_test_errno) {
        errno = cma_test_errno;
        return -1;
    }
#ifdef HAVE_PROCESS_VM_READV
    return (long)process_vm_readv((pid_t)pid, lv, ln, rv, rn, 0);
#else
    (void)pid; (void)lv; (void)ln; (void)rv; (void)rn;
    errno = ENOSYS;
    return -1;
#endif
}

/* Entries of each I/O vector list (IOV_MAX). */
static int cma_iov_count(void)
{
    long nv = sysconf(_SC_IOV_MAX);
    return nv > 0 && nv < 65536 ? (int)nv : 1024;
}

void uly_comm_cma_bufs(int P, uly_bufs *t)
{
    /* uly_comm_cma_probe: its exchange table (freed at its end), the process
     * ids and the I/O vectors of uly_comm_cma_read */
    uly_bufs_add(t, "cross-memory probe table", (uint64_t)(2 * P) * sizeof(int64_t), ULY_BUF_HEAP);
    uly_bufs_add(t, "cross-memory process ids", (uint64_t)P * sizeof(int64_t), ULY_BUF_HEAP);
#ifdef HAVE_PROCESS_VM_READV
    uly_bufs_add(t, "cross-memory I/O vectors", (uint64_t)(2 * cma_iov_count()) * sizeof(struct iovec), ULY_BUF_HEAP);
#endif
}

int uly_comm_cma_probe(uly_comm *c, int *usable)
{
    const int P = c->size;
    *usable = 0;
    /* the tables first, agreed: a failure there is an error, not a reason to fall back */
    int local = ULY_OK;
    int64_t *all = uly_calloc((size_t)(2 * P), sizeof *all);
    c->cma_iov = cma_iov_count();
    if (!all || !(c->pid = uly_calloc((size_t)P, sizeof *c->pid)))
        local = uly_set_error(ULY_ENOMEM, "cannot allocate the process ids of %d ranks", P);
#ifdef HAVE_PROCESS_VM_READV
    else if (!(c->iov = uly_calloc((size_t)(2 * c->cma_iov), sizeof(struct iovec))))
        local = uly_set_error(ULY_ENOMEM, "cannot allocate %d I/O vectors", 2 * c->cma_iov);
#endif
    int rc = uly_comm_agree(c, local, 0, NULL, NULL);
    if (rc) {
        uly_free(all);
        return rc;
    }
    /* every rank's process id and the address of a word of its own, known
     * to the others by its value; each rank reads every peer's */
    volatile uint64_t word = 0x756c7973u + (uint64_t)c->rank;
    int64_t mine[2] = {(int64_t)getpid(), (int64_t)(uintptr_t)&word};
    int e = MPI_Allgather(mine, 2, MPI_INT64_T, all, 2, MPI_INT64_T, c->comm);
    if (e != MPI_SUCCESS)
        local = mpi_fail(e, "MPI_Allgather (process ids)");
    for (int s = 0; s < P && !local; s++) {
        c->pid[s] = all[2 * s];
        if (s == c->rank)
            continue;
        uint64_t got = 0;
#ifdef HAVE_PROCESS_VM_READV
        struct iovec lv = {&got, sizeof got}, rv = {(void *)(uintptr_t)all[2 * s + 1], sizeof got};
        long n = cma_readv(c->pid[s], &lv, 1, &rv, 1);
#else
        long n = cma_readv(c->pid[s], NULL, 0, NULL, 0);
#endif
        if (n != (long)sizeof got)
            local = uly_set_error(ULY_EMPI, "process_vm_readv from rank %d failed on rank %d: %s", s, c->rank,
                                  n < 0 ? strerror(errno) : "short read");
        else if (got != 0x756c7973u + (uint64_t)s)
            local = uly_set_error(ULY_EMPI, "process_vm_readv from rank %d read a wrong value on rank %d", s,
                                  c->rank);
    }
    uly_free(all);
    /* settled before `word` goes: every peer has read it by then */
    rc = uly_comm_agree(c, local, 0, NULL, NULL);
    if (rc == ULY_EPEER) { /* keep the failing rank's own words */
        const char *m = uly_last_error(), *t = strstr(m, ": ");
        if (t)
            uly_set_error(ULY_EMPI, "%s", t + 2);
    }
    *usable = rc == ULY_OK;
    return ULY_OK;
}

int uly_comm_cma_read(uly_comm *c, int s, char *dst, const comm_block *db, uint64_t src, const comm_block *sb,
                      size_t es)
{
#ifdef HAVE_PROCESS_VM_READV
    if (!c->pid)
        return uly_set_error(ULY_EINVAL, "cross-memory attach was not set up");
    struct iovec *lv = c->iov, *rv = lv + c->cma_iov;
    const size_t len = db->len * es, rows = db->batches * db->rows;
    if (sb->len != db->len || sb->batches * sb->rows != rows)
        return uly_set_error(ULY_EINVAL, "cross-memory read: the two sides' blocks differ");
    int nl = 0, nr = 0;
    size_t want = 0;
    /* rows in order on both sides, adjacent rows merged into one vector; a
     * call whenever a list is full */
    for (size_t i = 0; i < rows && len; i++) {
        char *l = dst + (db->off + (i / db->rows) * db->bstride + (i % db->rows) * db->stride) * es;
        const uint64_t rr = src + (sb->off + (i / sb->rows) * sb->bstride + (i % sb->rows) * sb->stride) * es;
        const int lm = nl && (char *)lv[nl - 1].iov_base + lv[nl - 1].iov_len == l;
        const int rm = nr && (uint64_t)(uintptr_t)rv[nr - 1].iov_base + rv[nr - 1].iov_len == rr;
        if ((!lm && nl == c->cma_iov) || (!rm && nr == c->cma_iov)) {
            long got = cma_readv(c->pid[s], lv, (unsigned long)nl, rv, (unsigned long)nr);
            if (got != (long)want)
                return uly_set_error(ULY_EMPI, "cross-memory attach (process_vm_readv) from rank %d failed: %s", s,
                                     got < 0 ? strerror(errno) : "short read");
            nl = nr = 0;
            want = 0;
        }
        if (nl && lm)
            lv[nl - 1].iov_len += len;
        else
            lv[nl++] = (struct iovec){l, len};
        if (nr && rm)
            rv[nr - 1].iov_len += len;
        else
            rv[nr++] = (struct iovec){(void *)(uintptr_t)rr, len};
        want += len;
    }
    if (want) {
        long got = cma_readv(c->pid[s], lv, (unsigned long)nl, rv, (unsigned long)nr);
        if (got != (long)want)
            return uly_set_error(ULY_EMPI, "cross-memory attach (process_vm_readv) from rank %d failed: %s", s,
                                 got < 0 ? strerror(errno) : "short read");
    }
    return ULY_OK;
#else
    (void)c; (void)s; (void)dst; (void)db; (void)src; (void)sb; (void)es;
    return uly_set_error(ULY_EMPI, "cross-memory attach (process_vm_readv) is not available on this system");
#endif
}

/* ------------------------------------------------- training collectives */

int uly_comm_split(uly_comm *c, int color, int key, MPI_Comm *out)
{
    *out = MPI_COMM_NULL;
    MPI_TRY(MPI_Comm_split(c->comm, color, key, out), "MPI_Comm_split");
    MPI_TRY(MPI_Comm_set_errhandler(*out, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    return ULY_OK;
}

void uly_comm_free_split(MPI_Comm *m)
{
    if (*m != MPI_COMM_NULL)
        MPI_Comm_free(m);
}

int uly_comm_allreduce_sum(uly_comm *c, void *buf, size_t n, int type)
{
    MPI_Datatype t = type == ULY_COMM_I64 ? MPI_INT64_T : type == ULY_COMM_F32 ? MPI_FLOAT : MPI_DOUBLE;
    size_t es = type == ULY_COMM_F32 ? 4 : 8;
    for (size_t done = 0; done < n;) { /* counts are int: go in pieces */
        size_t k = n - done < (size_t)INT_MAX ? n - done : (size_t)INT_MAX;
        MPI_TRY(MPI_Allreduce(MPI_IN_PLACE, (char *)buf + done * es, (int)k, t, MPI_SUM, c->comm),
                "MPI_Allreduce");
        done += k;
    }
    return ULY_OK;
}

int uly_comm_allgatherv(uly_comm *c, const void *sbuf, void *rbuf, const size_t *rcount,
                        const size_t *rdispl, size_t elem_size)
{
    const int P = c->size;
    int *rc = c->icount[0], *rd = c->icount[1];
    for (int s = 0; s < P; s++) {
        if (rcount[s] > (size_t)INT_MAX || rdispl[s] > (size_t)INT_MAX)
            return uly_set_error(ULY_EOVERFLOW, "all-gather of %zu elements at %zu: too large for MPI",
                                 rcount[s], rdispl[s]);
        rc[s] = (int)rcount[s];
        rd[s] = (int)rdispl[s];
    }
    MPI_Datatype base = elem_size == 8 ? MPI_DOUBLE : MPI_FLOAT;
    MPI_TRY(MPI_Allgatherv(sbuf, rc[c->rank], base, rbuf, rc, rd, base, c->comm), "MPI_Allgatherv");
    return ULY_OK;
}

int uly_comm_bcast(uly_comm *c, void *buf, size_t n, int root)
{
    for (size_t done = 0; done < n;) {
        size_t k = n - done < (size_t)INT_MAX ? n - done : (size_t)INT_MAX;
        MPI_TRY(MPI_Bcast((char *)buf + done, (int)k, MPI_BYTE, root, c->comm), "MPI_Bcast");
        done += k;
    }
    return ULY_OK;
}

/* ------------------------------------------------- point-to-point */

#define ULY_P2P_PIECE ((size_t)1 << 30)

static int p2p_start(uly_comm *c, void *buf, size_t bytes, int peer, int tag, uly_comm_req *q, int send)
{
    size_t pieces = bytes == 0 ? 1 : (bytes + ULY_P2P_PIECE - 1) / ULY_P2P_PIECE;
    if (pieces > (size_t)(ULY_COMM_MAXREQ - q->n))
        return uly_set_error(ULY_EOVERFLOW, "message of %zu bytes needs too many pieces", bytes);
    for (size_t i = 0; i < pieces; i++) {
        size_t off = i * ULY_P2P_PIECE, n = bytes - off < ULY_P2P_PIECE ? bytes - off : ULY_P2P_PIECE;
        int e = send ? MPI_Isend((char *)buf + off, (int)n, MPI_BYTE, peer, tag, c->comm, &q->r[q->n])
                     : MPI_Irecv((char *)buf + off, (int)n, MPI_BYTE, peer, tag, c->comm, &q->r[q->n]);
        if (e != MPI_SUCCESS)
            return mpi_fail(e, send ? "MPI_Isend" : "MPI_Irecv");
        q->n++;
    }
    return ULY_OK;
}

int uly_comm_isend(uly_comm *c, const void *buf, size_t bytes, int peer, int tag, uly_comm_req *q)
{
    return p2p_start(c, (void *)buf, bytes, peer, tag, q, 1);
}

int uly_comm_irecv(uly_comm *c, void *buf, size_t bytes, int peer, int tag, uly_comm_req *q)
{
    return p2p_start(c, buf, bytes, peer, tag, q, 0);
}

int uly_comm_wait(uly_comm_req *q)
{
    if (q->n == 0)
        return ULY_OK;
    int e = MPI_Waitall(q->n, q->r, MPI_STATUSES_IGNORE);
    q->n = 0;
    if (e != MPI_SUCCESS)
        return mpi_fail(e, "MPI_Waitall");
    return ULY_OK;
}

int uly_comm_reduce_scatter_sum(uly_comm *c, const void *sbuf, void *rbuf, const size_t *rcount,
                                size_t elem_size)
{
    const int P = c->size;
    int *rc = c->icount[0];
    size_t total = 0;
    for (int s = 0; s < P; s++) {
        if (rcount[s] > (size_t)INT_MAX)
            return uly_set_error(ULY_EOVERFLOW, "reduce-scatter block of %zu elements: too large for MPI",
                                 rcount[s]);
        rc[s] = (int)rcount[s];
        total += rcount[s];
    }
    if (P == 1) {
        memcpy(rbuf, sbuf, total * elem_size);
        return ULY_OK;
    }
    MPI_Datatype base = elem_size == 8 ? MPI_DOUBLE : MPI_FLOAT;
    MPI_TRY(MPI_Reduce_scatter(sbuf, rbuf, rc, base, MPI_SUM, c->comm), "MPI_Reduce_scatter");
    return ULY_OK;
}
