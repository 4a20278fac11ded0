/* SPDX-License-Identifier: Apache-2.0 */
/*
 * agree.c -- the driver context, checked MPI calls and allocations, and the
 * two agreements of every MPI subcommand: of the options (once, before any
 * other collective) and of a status (after each step that can fail).
 * See drv.h.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "cli.h"
#include "drv.h"

/* Test hook of the library (exported, not in the public header). */
void uly_test_fail_alloc_at(long k);

int drv_open(drv *d, const char *cmd)
{
    memset(d, 0, sizeof *d);
    d->cmd = cmd;
    d->comm = MPI_COMM_NULL;
    d->node = MPI_COMM_NULL;
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        if (MPI_Init(NULL, NULL) != MPI_SUCCESS) {
            fprintf(stderr, "%s: MPI_Init failed\n", cmd);
            return DRV_RUNTIME;
        }
        d->finalize = 1;
    }
    /* From here on MPI errors come back as codes, on the world communicator too. */
    int e = MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (e == MPI_SUCCESS)
        e = MPI_Comm_dup(MPI_COMM_WORLD, &d->comm);
    if (e == MPI_SUCCESS)
        e = MPI_Comm_set_errhandler(d->comm, MPI_ERRORS_RETURN);
    if (e == MPI_SUCCESS)
        e = MPI_Comm_rank(d->comm, &d->rank);
    if (e == MPI_SUCCESS)
        e = MPI_Comm_size(d->comm, &d->size);
    if (e == MPI_SUCCESS)
        e = MPI_Comm_split_type(d->comm, MPI_COMM_TYPE_SHARED, d->rank, MPI_INFO_NULL, &d->node);
    if (e == MPI_SUCCESS)
        e = MPI_Comm_set_errhandler(d->node, MPI_ERRORS_RETURN);
    if (e != MPI_SUCCESS) {
        drv_mpi(d, e, "setting up the driver's communicator");
        fprintf(stderr, "%s: %s\n", cmd, d->msg);
        return drv_close(d, DRV_RUNTIME);
    }
    const char *k = getenv("ULYSSES_TEST_FAIL_ALLOC");
    if (k && *k) {
        char *end;
        long v = strtol(k, &end, 10);
        if (*end == '\0' && v > 0)
            uly_test_fail_alloc_at(v);
    }
    return 0;
}

int drv_close(drv *d, int code)
{
    fflush(stdout);
    fflush(stderr);
    if (d->node != MPI_COMM_NULL)
        MPI_Comm_free(&d->node);
    if (d->comm != MPI_COMM_NULL)
        MPI_Comm_free(&d->comm);
    if (d->finalize)
        MPI_Finalize();
    if (d->blas_stuck) {
        /* A thread still spins inside OpenBLAS holding its locks: the
         * library's exit handlers would wait for it forever. */
        _exit(code);
    }
    return code;
}

int drv_fail(drv *d, int code, const char *fmt, ...)
{
    if (d->code && !d->peer)
        return code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->msg, sizeof d->msg, fmt, ap);
    va_end(ap);
    d->code = code;
    d->peer = 0;
    return code;
}

int drv_lib(drv *d, int status, int code, const char *what)
{
    if (status == ULY_OK)
        return 0;
    if (status == ULY_EPEER) {
        if (!d->code) {
            d->code = DRV_RUNTIME;
            d->peer = 1;
            snprintf(d->msg, sizeof d->msg, "%s", uly_last_error());
        }
        return status;
    }
    drv_fail(d, code ? code : exit_status_of(status), "%s%s%s", what ? what : "", what ? ": " : "",
             uly_last_error());
    return status;
}

int drv_mpi(drv *d, int mpi_rc, const char *what)
{
    if (mpi_rc == MPI_SUCCESS)
        return 0;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(mpi_rc, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "error code %d", mpi_rc);
    drv_fail(d, DRV_RUNTIME, "%s failed: %s", what, text);
    return ULY_EMPI;
}

void *drv_alloc(drv *d, size_t n, const char *what)
{
    void *p = uly_malloc(n);
    if (!p) {
        char b[32];
        drv_fail(d, DRV_RUNTIME, "out of memory: cannot allocate %s for %s", drv_bytes(b, sizeof b, n), what);
    }
    return p;
}

void *drv_alloc_n(drv *d, size_t count, size_t size, const char *what)
{
    if (size && count > SIZE_MAX / size) {
        drv_fail(d, DRV_BADINPUT, "%s: %zu x %zu bytes overflows size_t", what, count, size);
        return NULL;
    }
    return drv_alloc(d, count * size, what);
}

void *drv_calloc_n(drv *d, size_t count, size_t size, const char *what)
{
    if (size && count > SIZE_MAX / size) {
        drv_fail(d, DRV_BADINPUT, "%s: %zu x %zu bytes overflows size_t", what, count, size);
        return NULL;
    }
    void *p = uly_calloc(count, size);
    if (!p) {
        char b[32];
        drv_fail(d, DRV_RUNTIME, "out of memory: cannot allocate %s for %s", drv_bytes(b, sizeof b, count * size),
                 what);
    }
    return p;
}

void drv_free(void *p)
{
    uly_free(p);
}

const char *drv_bytes(char *buf, size_t len, uint64_t b)
{
    return uly_fmt_bytes(buf, len, b);
}

void drv_say(const drv *d, const char *fmt, ...)
{
    if (d->rank != 0)
        return;
    char m[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s: %s\n", d->cmd, m);
    fflush(stderr);
}

int drv_parse(drv *d, int argc, char **argv, const struct arg_opt *opts)
{
    char msg[1024] = "";
    int prc = args_parse(d->cmd, argc - 1, argv + 1, opts, msg, sizeof msg);
    if (prc == ARGS_HELP)
        return DRV_PARSE_HELP;
    if (prc == ARGS_ERROR) {
        size_t k = strlen(d->cmd);
        drv_fail(d, DRV_BADINPUT, "%s", strncmp(msg, d->cmd, k) == 0 && msg[k] == ':' ? msg + k + 2 : msg);
        return DRV_PARSE_ERROR;
    }
    return DRV_PARSE_OK;
}

void drv_usage(const drv *d, const char *synopsis, const struct arg_opt *opts)
{
    if (d->rank == 0)
        args_usage(stdout, "ulysses", synopsis, opts);
}

/* ---------------------------------------------------------------- sync */

/* The message and exit status of `from`, broadcast; rank 0 prints it. */
static int announce(drv *d, int from, int all_failed)
{
    struct { int code; char msg[1024]; } m;
    memset(&m, 0, sizeof m);
    if (d->rank == from) {
        m.code = d->code;
        snprintf(m.msg, sizeof m.msg, "%s", d->msg);
    }
    if (d->size > 1 && MPI_Bcast(&m, (int)sizeof m, MPI_BYTE, from, d->comm) != MPI_SUCCESS) {
        /* cannot even tell the others: say it here, exit as a run-time failure */
        fprintf(stderr, "%s: rank %d: %s (and MPI_Bcast of the message failed)\n", d->cmd, d->rank, d->msg);
        return DRV_RUNTIME;
    }
    m.msg[sizeof m.msg - 1] = '\0';
    if (d->rank == 0) {
        if (d->line_open)
            fputc('\n', stderr);
        d->line_open = 0;
        if (d->size > 1 && !all_failed)
            fprintf(stderr, "%s: rank %d: %s\n", d->cmd, from, m.msg);
        else
            fprintf(stderr, "%s: %s\n", d->cmd, m.msg);
        fflush(stderr);
    }
    return m.code ? m.code : DRV_RUNTIME;
}

int drv_sync(drv *d)
{
    /* key: own failures beat "another rank failed", then the lowest rank */
    int64_t key[2] = {0, 0}, res[2];
    if (d->code)
        key[0] = (int64_t)(d->peer ? 0 : d->size) + (d->size - d->rank);
    key[1] = d->code ? 0 : 1; /* any rank without failure -> not all failed */
    if (d->size > 1) {
        int e = MPI_Allreduce(key, res, 2, MPI_INT64_T, MPI_MAX, d->comm);
        if (e != MPI_SUCCESS) {
            drv_mpi(d, e, "MPI_Allreduce (status agreement)");
            fprintf(stderr, "%s: rank %d: %s\n", d->cmd, d->rank, d->msg);
            return DRV_RUNTIME;
        }
    } else {
        res[0] = key[0];
        res[1] = key[1];
    }
    if (res[0] == 0)
        return 0;
    int from = d->size - (int)(res[0] > d->size ? res[0] - d->size : res[0]);
    return announce(d, from, res[1] == 0);
}

/* ------------------------------------------------------------ agreement */

int drv_agree(drv *d, int parse, const drv_field *f, int n)
{
    int64_t mine[DRV_REC_LEN];
    drv_agree_record(mine, d->cmd, parse, f, n);
    n = (int)mine[DRV_REC_N];

    int64_t *tab = NULL;
    if (d->size > 1) {
        tab = uly_malloc((size_t)d->size * DRV_REC_LEN * sizeof *tab);
        /* An allocation failure here still has to take part in the exchange:
         * fall back to sending a record that marks the failure and reading
         * nothing back; the allreduce below tells everyone. */
        int ok = tab != NULL, all_ok = 0;
        int e = MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, d->comm);
        if (e != MPI_SUCCESS || !all_ok) {
            if (e != MPI_SUCCESS)
                drv_mpi(d, e, "MPI_Allreduce (option agreement)");
            else if (!ok)
                drv_fail(d, DRV_RUNTIME, "out of memory: cannot allocate the option agreement table");
            uly_free(tab);
            if (e != MPI_SUCCESS) {
                fprintf(stderr, "%s: rank %d: %s\n", d->cmd, d->rank, d->msg);
                return DRV_RUNTIME;
            }
            return drv_sync(d);
        }
        e = MPI_Allgather(mine, DRV_REC_LEN, MPI_INT64_T, tab, DRV_REC_LEN, MPI_INT64_T, d->comm);
        if (e != MPI_SUCCESS) {
            drv_mpi(d, e, "MPI_Allgather (option agreement)");
            fprintf(stderr, "%s: rank %d: %s\n", d->cmd, d->rank, d->msg);
            uly_free(tab);
            return DRV_RUNTIME;
        }
    } else {
        tab = mine;
    }
    const int P = d->size;
    drv_verdict v;
    drv_agree_verdict(tab, P, &v);
    char text[1024] = "";
    if (v.cmd_differs) {
        /* every rank sees it; rank 0 names the ranks running another command than its own */
        if (d->rank == 0) {
            char ranks[160] = "";
            for (int r = 0; r < P && !ranks[0]; r++)
                if (tab[(size_t)r * DRV_REC_LEN + DRV_REC_CMD] != mine[DRV_REC_CMD])
                    drv_agree_ranks(ranks, sizeof ranks, tab, P, DRV_REC_CMD, tab[(size_t)r * DRV_REC_LEN + DRV_REC_CMD]);
            if (ranks[0])
                fprintf(stderr, "%s: ranks run different commands: '%s' on rank 0, another command on rank%s %s\n",
                        d->cmd, d->cmd, strchr(ranks, ',') || strchr(ranks, '-') ? "s" : "", ranks);
            else
                fprintf(stderr, "%s: ranks run different versions of the program (the option agreement records differ)\n",
                        d->cmd);
        }
        if (tab != mine)
            uly_free(tab);
        d->code = DRV_BADINPUT;
        return DRV_BADINPUT;
    }
    if (v.first_err >= 0) {
        if (parse == DRV_PARSE_ERROR)
            d->code = DRV_BADINPUT;
        if (tab != mine)
            uly_free(tab);
        if (P > 1) {
            char m[1024];
            snprintf(m, sizeof m, "%s", d->msg);
            int e = MPI_Bcast(m, (int)sizeof m, MPI_CHAR, v.first_err, d->comm);
            if (e != MPI_SUCCESS)
                return DRV_RUNTIME;
            m[sizeof m - 1] = '\0';
            if (d->rank == 0) {
                if (v.nerr < P)
                    fprintf(stderr, "%s: %s (on rank %d; %d of %d ranks failed to parse their options)\n", d->cmd,
                            m, v.first_err, v.nerr, P);
                else
                    fprintf(stderr, "%s: %s\n", d->cmd, m);
            }
        } else {
            fprintf(stderr, "%s: %s\n", d->cmd, d->msg);
        }
        return DRV_BADINPUT;
    }
    if (v.nhelp > 0) {
        if (v.nhelp < P && d->rank == 0) {
            char ranks[160], others[160];
            drv_agree_ranks(ranks, sizeof ranks, tab, P, DRV_REC_PARSE, DRV_PARSE_HELP);
            drv_agree_ranks(others, sizeof others, tab, P, DRV_REC_PARSE, DRV_PARSE_OK);
            fprintf(stderr, "%s: ranks disagree on --help: given on rank%s %s, not on rank%s %s\n", d->cmd,
                    v.nhelp > 1 ? "s" : "", ranks, P - v.nhelp > 1 ? "s" : "", others);
        }
        if (tab != mine)
            uly_free(tab);
        if (v.nhelp == P)
            return DRV_AGREE_HELP;
        d->code = DRV_BADINPUT;
        return DRV_BADINPUT;
    }
    if (v.field >= 0 && v.field < n) {
        const int i = v.field, col = DRV_REC_HEAD + i;
        /* every rank knows which field differs: the strings of a text
         * option go to rank 0 so that the message can show them */
        char *strs = NULL;
        if (f[i].kind == DRV_F_STR && P > 1) {
            char mystr[DRV_STRLEN] = "";
            snprintf(mystr, sizeof mystr, "%s", f[i].s ? f[i].s : "");
            strs = d->rank == 0 ? uly_malloc((size_t)P * DRV_STRLEN) : NULL;
            int ok = strs != NULL;
            if (MPI_Bcast(&ok, 1, MPI_INT, 0, d->comm) != MPI_SUCCESS)
                ok = 0;
            if (ok && MPI_Gather(mystr, DRV_STRLEN, MPI_CHAR, strs, DRV_STRLEN, MPI_CHAR, 0, d->comm) != MPI_SUCCESS)
                ok = 0;
            if (!ok) { /* the message falls back to "another value" */
                uly_free(strs);
                strs = NULL;
            }
            for (int r = 0; strs && r < P; r++)
                strs[(size_t)r * DRV_STRLEN + DRV_STRLEN - 1] = '\0';
        }
        if (d->rank == 0) {
            drv_agree_describe(text, sizeof text, P, &f[i], tab, col, strs);
            fprintf(stderr, "%s: %s\n", d->cmd, text);
        }
        uly_free(strs);
    }
    if (tab != mine)
        uly_free(tab);
    if (v.rc)
        d->code = v.rc;
    return v.rc;
}
