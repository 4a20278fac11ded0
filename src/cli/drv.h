/* SPDX-License-Identifier: Apache-2.0 */
/*
 * drv.h -- what the MPI subcommands of `ulysses` share so that they can
 * neither hang nor disagree on how they ended:
 *
 *   - a driver context holding this rank's first failure (exit status and
 *     message);
 *   - every MPI call of a driver checked through drv_mpi;
 *   - drv_agree: ONE exchange, right after parsing and before any other
 *     collective, of the parse status and every option that changes control
 *     flow or collectives; a mismatch stops every rank with exit status 2,
 *     naming the option and the ranks;
 *   - drv_sync: agreement on a status (after each step that can fail on one
 *     rank), so that every rank stops together with the same exit status and
 *     the message of the lowest failing rank is printed once (by rank 0);
 *   - output files (outfile.c, over src/base/base_out.c, the rule both
 *     programs share) and the memory preflight and OpenBLAS warm-up
 *     (preflight.c).
 *
 * Exit statuses, identical on every rank: 0 success, 1 run-time failure
 * (I/O, memory, MPI, non-finite results, a failed --check), 2 bad input or
 * configuration (options, files, shapes, ranks that disagree).
 *
 * What this is not: a library.  Library calls return uly_status; only the
 * drivers print and choose exit statuses.
 */
#ifndef ULY_CLI_DRV_H
#define ULY_CLI_DRV_H

#include <stddef.h>
#include <stdint.h>
#include <mpi.h>

#include "agree_table.h"
#include "base/base.h"
#include "base/base_out.h"
#include "ulysses.h"
#include "ulysses_dist.h"

#if defined(__GNUC__)
#define DRV_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define DRV_PRINTF(a, b)
#endif

enum { DRV_OK = ULY_EXIT_OK, DRV_RUNTIME = ULY_EXIT_RUNTIME, DRV_BADINPUT = ULY_EXIT_BADINPUT };

typedef struct drv {
    const char *cmd;       /* "ulysses attn": prefix of every message */
    MPI_Comm comm;         /* private duplicate of MPI_COMM_WORLD, MPI_ERRORS_RETURN */
    MPI_Comm node;         /* the ranks sharing this node's memory (MPI_COMM_TYPE_SHARED) */
    int rank, size;
    int code;              /* exit status of this rank's first failure; 0: none */
    int peer;              /* this rank only knows that another rank failed */
    int finalize;          /* drv_open called MPI_Init */
    int blas_stuck;        /* a BLAS warm-up never returned (drv_blas_warmup): drv_close ends with _exit */
    int line_open;         /* rank 0's stderr ends in an unfinished line (a progress line on a terminal):
                              drv_sync's message ends it first */
    char msg[1024];        /* message of the first failure (without the cmd prefix) */
} drv;

/* MPI_Init (unless already initialised), duplicate MPI_COMM_WORLD with
 * errors returned, and set the test hook ULYSSES_TEST_FAIL_ALLOC (see
 * doc/reliability.md).  On failure prints and returns 1. */
int drv_open(drv *d, const char *cmd);
/* Free the communicator and MPI_Finalize if drv_open initialised MPI;
 * returns code. */
int drv_close(drv *d, int code);

/* Record a local failure (the first one is kept) and return code. */
int drv_fail(drv *d, int code, const char *fmt, ...) DRV_PRINTF(3, 4);
/* Record the failure of a library call: status ULY_EPEER only marks that
 * another rank failed; otherwise "what: uly_last_error()" with exit status
 * code (0: the default for the status, see exit_status_of in cli.h).  Returns status. */
int drv_lib(drv *d, int status, int code, const char *what);
/* Check an MPI return code: on error records "what failed: MPI's text" (exit
 * status 1) and returns ULY_EMPI; MPI_SUCCESS returns 0. */
int drv_mpi(drv *d, int mpi_rc, const char *what);
/* Allocation through the library's hooks (so that its fault injection covers
 * the drivers); failure records "cannot allocate N bytes for what" (exit 1). */
void *drv_alloc(drv *d, size_t n, const char *what);
/* The same for count x size bytes, refusing a product that overflows. */
void *drv_alloc_n(drv *d, size_t count, size_t size, const char *what);
/* The same, zeroed (uly_calloc: pages the caller does not write stay untouched). */
void *drv_calloc_n(drv *d, size_t count, size_t size, const char *what);
void drv_free(void *p);

/* Collective: agree on whether any rank failed.  Returns 0 on every rank
 * when none did; otherwise every rank returns the exit status of the lowest
 * rank with a failure of its own, and rank 0 prints that rank's message. */
int drv_sync(drv *d);
/* Print a message from rank 0 only ("cmd: ..."). */
void drv_say(const drv *d, const char *fmt, ...) DRV_PRINTF(2, 3);

/* One step of a driver: make the call, then agree on the status (drv_sync);
 * when any rank failed, return the agreed exit status from the enclosing
 * function (which declares `int rc`). */
#define DRV_STEP(d, call)               \
    do {                                \
        (void)(call);                   \
        if ((rc = drv_sync(d)))         \
            return rc;                  \
    } while (0)

/* args_parse (args.h) of argv[1..] into DRV_PARSE_*; on an error its message
 * (without the "cmd: " prefix) is recorded in d. */
struct arg_opt;
int drv_parse(drv *d, int argc, char **argv, const struct arg_opt *opts);
/* Rank 0 prints the usage (args_usage) after every rank asked for --help. */
void drv_usage(const drv *d, const char *synopsis, const struct arg_opt *opts);

/* ------------------------------------------------------------ agreement */

/* drv_field, DRV_AGREE_MAX, DRV_PARSE_*: agree_table.h (the MPI-free part). */

/*
 * The one agreement exchange (collective; one MPI_Allgather, plus one
 * MPI_Bcast of a message on failure).  parse is this rank's DRV_PARSE_*;
 * on DRV_PARSE_ERROR, d->msg holds the parser's message.  The command name
 * is part of the exchange (ranks running different subcommands disagree).
 * Returns on every rank:
 *   0                 all parsed, all fields equal;
 *   DRV_AGREE_HELP    every rank was asked for --help (print it on rank 0);
 *                     negative, so that no exit status can be mistaken for it;
 *   DRV_RUNTIME (1)   the exchange itself failed (its table could not be
 *                     allocated, an MPI call failed): the message is printed;
 *   DRV_BADINPUT (2)  a parse error on some rank (its message printed once,
 *                     naming the rank), --help on some ranks only, or a field
 *                     that differs (rank 0 prints which option and which
 *                     ranks hold which value).
 * At most DRV_AGREE_MAX fields.
 */
enum { DRV_AGREE_HELP = -1 };
int drv_agree(drv *d, int parse, const drv_field *f, int n);


/* ---------------------------------------------------- atomic output files */

/*
 * The output files of a subcommand: src/base/base_out.h (one rule for both
 * programs: an output is never an input or another output; all outputs are
 * temporaries written and fsync'ed first and renamed together at the end; a
 * killed run's temporaries are removed by the next run).  These wrap it for
 * the MPI driver: failures are recorded in d (drv_fail) with the exit status
 * base_out chose, and rank 0 prints a note for each stale temporary removed.
 * Only rank 0 prepares, writes and commits; the caller agrees on the status
 * (drv_sync) after each step.
 */
typedef uly_out drv_out;
typedef uly_in drv_in;

/* Before computing: the checks, then the temporaries (base_out.h). */
int drv_out_prepare(drv *d, drv_out *outs, int n, const drv_in *ins, int nin);
/* Write the whole content of o through the library's .npy writer and fsync
 * it (no rename yet: drv_out_commit).  Exit status 1 on failure. */
int drv_out_npy(drv *d, drv_out *o, uly_dtype t, int ndim, const int64_t *shape, const void *data);
/* The caller wrote o's content (through a FILE from fdopen(dup(o->fd)),
 * flushed and closed, or through o->tmp by name): fsync it. */
int drv_out_ready(drv *d, drv_out *o);
/* Flush and close f (a FILE from fdopen(dup(o->fd))), then drv_out_ready;
 * a write error is exit 1 naming the option and the path. */
int drv_out_close(drv *d, drv_out *o, FILE *f);
/* Rename every prepared output of outs[0..n) into place (each ready).
 * Exit status 1 on failure, naming what was and was not committed. */
int drv_out_commit(drv *d, drv_out *outs, int n);
/* Remove the temporary file of every output not committed. */
void drv_out_discard(drv_out *outs, int n);
/* Mark outputs as holding nothing yet (so that drv_out_discard is safe). */
void drv_out_init(drv_out *outs, int n);

/* ---------------------------------------------------- memory and BLAS */

/* What the process can still get, in bytes, and which limit decides. */
typedef struct drv_mem {
    uint64_t avail;           /* the smallest of the limits below (UINT64_MAX: none known) */
    const char *limit;        /* its name: "RLIMIT_AS", "RLIMIT_DATA", "cgroup memory.max", "MemAvailable" */
    uint64_t as_left, data_left, cgroup_left, mem_available;
} drv_mem;

void drv_mem_probe(drv_mem *m);
/* Collective (over the ranks of this node): refuse (exit 2, with the
 * numbers) when need > what this process can get (RLIMIT_AS, RLIMIT_DATA),
 * or when the needs of all ranks on this node together exceed what the node
 * has (cgroup memory.max, MemAvailable; $ULYSSES_TEST_MEM_AVAILABLE
 * replaces MemAvailable, a test aid), unless force (then only a warning
 * from this rank).  `mapped`: address space this process reserves on top
 * of need without touching it (the peers' segments of a shared-memory
 * window, which the node holds once in their owners' need; bench a2a's
 * untouched MPI buffers), counted against RLIMIT_AS only.
 * Every rank must call it, even after a local failure. */
int drv_preflight(drv *d, uint64_t need, uint64_t mapped, const char *breakdown, int force);
/* OpenMP threads a kernel will use: requested, or the OpenMP default when < 1. */
int drv_threads(int requested);
/* Local: a small sgemm on `threads` OpenMP threads, so that OpenBLAS
 * allocates its per-thread buffers now; when it does not return within
 * DRV_WARMUP_SECONDS (or $ULYSSES_BLAS_WARMUP_SECONDS; OpenBLAS retries a
 * failed buffer allocation forever)
 * the failure is recorded (exit 1).  Returns 0 or 1. */
int drv_blas_warmup(drv *d, int threads);
enum { DRV_WARMUP_SECONDS = 10 };
/* A warm-up that does not return is abandoned (its thread may still spin
 * inside OpenBLAS): it sets d->blas_stuck, and drv_close then ends the
 * process with _exit. */

/* The library's part of a rank's memory: what uly_sp_create will allocate
 * there (uly_sp_memory, the table the library carves its buffers from),
 * heap and this rank's segment of the shared-memory window (both memory
 * the rank needs), and with --a2a shm or cma the other group members'
 * segments it maps (address space only: each is memory once, in its
 * owner's need).  one_node: every rank shares this node
 * (MPI_COMM_TYPE_SHARED), where auto makes its window too; its mapping is
 * not counted (auto checks the address space itself and falls back to pack,
 * with a note, whose buffers the figures bound).  Across nodes auto runs on
 * pack's buffers.  Local, no MPI; returns a uly_status (the create refuses
 * the same options with its message). */
typedef struct drv_lib_mem {
    uint64_t heap, window, mapped;
    int mapped_segments;   /* how many segments `mapped` holds */
} drv_lib_mem;
int drv_lib_memory(const uly_attn_desc *a, const uly_sp_opts *o, int P, int rank, int one_node, drv_lib_mem *m);
/* uly_sp_create on d->comm, its status recorded (drv_lib).  With
 * $ULYSSES_MEMORY_REPORT=1 (a test aid, doc/cli.md) each rank prints to
 * stderr the heap and window bytes of its preflight's library part (m) and
 * those the create allocated: the bytes the allocation hooks counted during
 * the call (uly_base_alloc_bytes) and its window segment. */
int drv_sp_create(drv *d, const uly_attn_desc *a, const uly_sp_opts *o, const drv_lib_mem *m, uly_sp **S);

/* Largest --seq and --window of attn and bench (1024G tokens): what fits
 * is decided by the memory preflight. */
#define DRV_SEQ_MAX ((int64_t)1 << 40)

/* Human-readable bytes ("1.50 GiB") into buf. */
const char *drv_bytes(char *buf, size_t len, uint64_t bytes);

#endif
