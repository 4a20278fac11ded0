/* SPDX-License-Identifier: Apache-2.0 */
/*
 * calibrate.c -- `ulysses-sim calibrate`: fit a platform's collective
 * parameters (the intra- and inter-node efficiencies and latencies, the NVLS
 * efficiency) to a user's own nccl-tests output, print the residual per
 * size and write the calibrated platform file.
 *
 * The input is the text nccl-tests' all_reduce_perf, all_gather_perf,
 * reduce_scatter_perf, alltoall_perf and sendrecv_perf print
 * (github.com/NVIDIA/nccl-tests, src/util.cu writeBenchmarkLinePreamble /
 * writeBenchmarkLineBody / writeResultHeader, and the older layouts of
 * src/common.cu): '#' comment lines (the "# nThread ... nGpus ..." run line,
 * one "#  Rank R Group G Pid P on HOST device D [...] NAME" line per GPU, the
 * column header "size count type redop root time algbw busbw #wrong time
 * algbw busbw #wrong", the "# Avg bus bandwidth" footer) and one data row
 * per size and type.  Columns are found by the header's names, so the older
 * layouts ("bytes N type op ... res", no root, "error" columns), the
 * per-iteration and timestamp columns and "N/A" cells read alike.  Pasted
 * text whose '#' were eaten (a markdown renderer) is accepted for the lines
 * it names, as is mpirun --tag-output's "[1,0]<stdout>:" before a line;
 * NCCL's own debug lines ("host:pid:tid [d] NCCL INFO ...") and
 * the command line are skipped and counted; any other line is an error
 * naming FILE:LINE (exit 2).
 *
 * The fit treats the simulator as a black box: every prediction is
 * usim_coll_run on the platform with trial values, the collective built as
 * `ulysses-sim coll` builds it (sim/cli/coll.c; the test compares both), so
 * the fit follows the collective model wherever it goes.  The objective is
 * the mean squared relative error of the predicted times against the
 * measured ones (the mean of the out-of-place and in-place times of a row);
 * the optimiser is coordinate descent in log space, each coordinate a grid
 * scan over its physical range followed by a golden-section search in the
 * best bracket, a few rounds.  A parameter no measured point reacts to
 * (doc/simulator.md, "Calibrating to your nccl-tests") is left unchanged and
 * printed as not identified.
 *
 * Not here: `ulysses calibrate` (src/cli/cmd_calibrate.c), which measures
 * the CPU program's own rates.
 */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <stdarg.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/base_json.h"
#include "files.h"
#include "opts.h"
#include "output.h"
#include "usim.h"

static const char calibrate_usage[] =
    "usage: ulysses-sim calibrate --platform P --nccl-tests FILE... [options]\n"
    "\n"
    "Fits the platform's collective parameters (intra_node and inter_node efficiency,\n"
    "nccl_latency_scale and latency_us; intra_node nvls_efficiency) to nccl-tests\n"
    "output (all_reduce_perf, all_gather_perf, reduce_scatter_perf, alltoall_perf,\n"
    "sendrecv_perf), prints the\n"
    "measured and predicted time of every size and writes the calibrated platform\n"
    "(see doc/simulator.md, \"Calibrating to your nccl-tests\").\n"
    "\n"
    "  --platform P       platform preset or file to start from (required)\n"
    "  --nccl-tests FILE...  one or more files of nccl-tests output (at most 64)\n"
    "  --coll LIST        the collective of each file (one for all, or one per file):\n"
    "                     all-reduce | all-gather | reduce-scatter | all-to-all |\n"
    "                     sendrecv (or all_reduce_perf ...); default: the file's\n"
    "                     banner or command line\n"
    "  --gpus LIST        GPUs of each file (one for all, or one per file); default:\n"
    "                     its '#  Rank' lines (a value that disagrees is refused)\n"
    "  --out FILE         write the calibrated platform JSON (never an input)\n"
    "  --force            replace FILE when it exists\n"
    "  --format F         table | json (default table); --json = --format json\n"
    "  -h, --help         this text\n"
    "\n"
    "Exit 2 on input it cannot read (naming FILE:LINE), a GPU count the platform\n"
    "cannot place, or an --out that exists (without --force) or is an input.\n";

#define MAX_FILES 64
#define MAX_ROWS 4096
#define MAX_TOK 64
#define MAX_RANKS 65536

/* ------------------------------------------------------------ collectives */

typedef struct coll_kind {
    const char *perf;    /* nccl-tests binary */
    const char *name;    /* simulator name */
    usim_coll_type type; /* USIM_A2A_DIRECT for all-to-all */
} coll_kind;

static const coll_kind kinds[] = {
    {"all_reduce_perf", "all-reduce", USIM_ALLREDUCE},
    {"all_gather_perf", "all-gather", USIM_ALLGATHER},
    {"reduce_scatter_perf", "reduce-scatter", USIM_REDUCE_SCATTER},
    {"alltoall_perf", "all-to-all", USIM_A2A_DIRECT},
    {"sendrecv_perf", "sendrecv", USIM_RING_SHIFT},
};
enum { NKIND = (int)(sizeof kinds / sizeof kinds[0]) };
/* nccl-tests binaries the simulator has no model for */
static const char *const unmodelled[] = {"broadcast_perf", "reduce_perf", "gather_perf", "scatter_perf",
                                         "hypercube_perf", "alltoallv_perf", NULL};

/* The kind named by s (a simulator name, a binary, with or without _perf or
 * _mpi), -1 when none, -2 when it is an nccl-tests binary not modelled. */
static int kind_parse(const char *s)
{
    char b[64];
    size_t l = strlen(s);
    if (l >= sizeof b)
        return -1;
    memcpy(b, s, l + 1);
    if (l > 4 && strcmp(b + l - 4, "_mpi") == 0)
        b[l -= 4] = 0;
    for (int k = 0; k < NKIND; k++) {
        size_t pl = strlen(kinds[k].perf) - 5;   /* without "_perf" */
        if (strcmp(b, kinds[k].name) == 0 || strcmp(b, kinds[k].perf) == 0 ||
            (l == pl && strncmp(b, kinds[k].perf, pl) == 0))
            return k;
    }
    for (int k = 0; unmodelled[k]; k++)
        if (strcmp(b, unmodelled[k]) == 0 || strncmp(b, unmodelled[k], strlen(unmodelled[k]) - 5) == 0)
            return -2;
    return -1;
}

/* ------------------------------------------------------------ the parser */

typedef struct nt_row {
    int64_t bytes;
    char type[16];
    double t_out, t_in;      /* us, < 0: N/A */
    double busbw_out, busbw_in;
    int line;
    double meas_s;           /* the mean of the times present, seconds */
    /* predictions: before the fit, after it */
    double before_s, after_s;
    usim_algo algo;
    usim_proto proto;
} nt_row;

typedef struct nt_file {
    const char *path;
    int kind, kind_line;            /* kinds[] index, -1 unknown; where it was named */
    char kind_from[24];             /* "banner", "command line", "--coll" */
    int nthread, ngpus_proc, run_line;
    int nranks, nhosts, per_host;
    int gpus, nodes;
    int header_line, ncols, has_timestamp;
    int c_size, c_type, c_time[2], c_busbw[2], c_wrong[2];
    int wrong_is_count;             /* "#wrong" (a count) rather than the older "error" (a deviation) */
    double footer_avg;              /* "# Avg bus bandwidth", < 0: none */
    int footer_line;
    int debug_lines, command_lines, zero_rows, failed_rows, na_rows;
    double bw_sum;                  /* every busbw cell of the table (nccl-tests' footer average) */
    int bw_n;
    nt_row *rows;
    int nrows;
} nt_file;

static void die_at(const char *path, int line, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4), noreturn))
#endif
    ;

static void die_at(const char *path, int line, const char *fmt, ...)
{
    char msg[600], pn[OUT_SAFE];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (line > 0)
        die_usage("calibrate: %s:%d: %s", out_safe(path, pn), line, msg);
    die_usage("calibrate: %s: %s", out_safe(path, pn), msg);
}

static int tokenize(char *s, char **tok, int max)
{
    int n = 0;
    for (char *p = s; *p;) {
        while (*p && isspace((unsigned char)*p))
            p++;
        if (!*p)
            break;
        if (n == max)
            return max + 1;
        tok[n++] = p;
        while (*p && !isspace((unsigned char)*p))
            p++;
        if (*p)
            *p++ = 0;
    }
    return n;
}

static int is_int(const char *s, int64_t *v)
{
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (end == s || *end || errno)
        return 0;
    *v = x;
    return 1;
}

/* A number cell: 1 with *v, 0 for "N/A" (*v = -1), -1 when neither. */
static int num_cell(const char *s, double *v)
{
    if (strcmp(s, "N/A") == 0 || strcmp(s, "n/a") == 0) {
        *v = -1;
        return 0;
    }
    char *end;
    errno = 0;
    double x = strtod(s, &end);
    if (end == s || *end || errno || !isfinite(x) || x < 0)
        return -1;
    *v = x;
    return 1;
}

/* The last path component of a token, to recognise a binary in a command line. */
static const char *base_name(const char *t)
{
    const char *s = strrchr(t, '/');
    return s ? s + 1 : t;
}

static void set_kind(nt_file *f, int k, int line, const char *from)
{
    if (strcmp(f->kind_from, "--coll option") == 0)
        return;   /* the option decides */
    if (k == -2)
        die_at(f->path, line, "the simulator models all-reduce, all-gather, reduce-scatter, all-to-all and "
                              "sendrecv, not this nccl-tests binary");
    if (f->kind >= 0 && f->kind != k)
        die_at(f->path, line, "names %s, but line %d named %s: give --coll", kinds[k].perf, f->kind_line,
               kinds[f->kind].perf);
    if (f->kind < 0) {
        f->kind = k;
        f->kind_line = line;
        snprintf(f->kind_from, sizeof f->kind_from, "%s", from);
    }
}

typedef struct host_count {
    char name[128];
    int n;
} host_count;

/* The column header (tokens after '#'): where each field is. */
static void read_header(nt_file *f, char **t, int n, int line)
{
    if (f->header_line)
        die_at(f->path, line, "a second column header (the first is at line %d): one nccl-tests run per file",
               f->header_line);
    f->header_line = line;
    f->ncols = n;
    f->c_size = 0;
    f->c_type = -1;
    int nt = 0, nb = 0, nw = 0;
    for (int i = 0; i < n; i++) {
        if (strcmp(t[i], "type") == 0)
            f->c_type = i;
        else if ((strcmp(t[i], "time") == 0 || strcmp(t[i], "cputime") == 0) && nt < 2)
            f->c_time[nt++] = i;
        else if (strcmp(t[i], "busbw") == 0 && nb < 2)
            f->c_busbw[nb++] = i;
        else if ((strcmp(t[i], "#wrong") == 0 || strcmp(t[i], "error") == 0 || strcmp(t[i], "res") == 0) && nw < 2)
            f->c_wrong[nw++] = i, f->wrong_is_count = strcmp(t[i], "#wrong") == 0;
        else if (strcmp(t[i], "timestamp") == 0)
            f->has_timestamp = 1;
    }
    if (nt == 0 || nb != nt || f->c_type < 0)
        die_at(f->path, line, "a column header without time, busbw and type columns");
    if (nt == 1)
        f->c_time[1] = f->c_busbw[1] = -1;
    if (nw < nt)
        f->c_wrong[0] = f->c_wrong[1] = -1;
    if (f->has_timestamp)   /* "timestamp" is one name over two fields (date and time) */
        f->ncols++;
}

static void read_row(nt_file *f, char **t, int n, int line)
{
    if (!f->header_line)
        die_at(f->path, line, "a data row before the column header (\"# size count type ... time algbw busbw\")");
    if (n != f->ncols)
        die_at(f->path, line, "%d fields, but the column header (line %d) has %d", n, f->header_line, f->ncols);
    int64_t bytes;
    if (!is_int(t[f->c_size], &bytes) || bytes < 0 || bytes > ((int64_t)1 << 40))
        die_at(f->path, line, "size '%s' is not a byte count in [0, 1T]", t[f->c_size]);
    double tm[2] = {-1, -1}, bw[2] = {-1, -1};
    int have = 0, wrong = 0;
    for (int s = 0; s < 2; s++) {
        if (f->c_time[s] < 0)
            continue;
        int a = num_cell(t[f->c_time[s]], &tm[s]), b = num_cell(t[f->c_busbw[s]], &bw[s]);
        if (a < 0 || b < 0)
            die_at(f->path, line, "%s time or busbw '%s' / '%s' is not a number or N/A",
                   s ? "in-place" : "out-of-place", t[f->c_time[s]], t[f->c_busbw[s]]);
        if (a > 0 && tm[s] <= 0)
            die_at(f->path, line, "a time of 0 us");
        have += a > 0;
        if (f->c_wrong[s] >= 0) {
            double w;
            if (num_cell(t[f->c_wrong[s]], &w) < 0)
                die_at(f->path, line, "'%s' in the %s column is not a number or N/A", t[f->c_wrong[s]],
                       f->wrong_is_count ? "#wrong" : "error");
            wrong |= f->wrong_is_count && w > 0;
        }
    }
    if (f->nrows == MAX_ROWS)
        die_at(f->path, line, "more than %d data rows", MAX_ROWS);
    for (int s = 0; s < 2; s++)
        if (bw[s] >= 0)
            f->bw_sum += bw[s], f->bw_n++;
    if (bytes == 0) {
        f->zero_rows++;
        return;
    }
    if (wrong) {
        f->failed_rows++;
        return;
    }
    if (!have) {
        f->na_rows++;
        return;
    }
    nt_row *r = &f->rows[f->nrows++];
    memset(r, 0, sizeof *r);
    r->bytes = bytes;
    r->line = line;
    snprintf(r->type, sizeof r->type, "%s", t[f->c_type]);
    r->t_out = tm[0];
    r->t_in = tm[1];
    r->busbw_out = bw[0];
    r->busbw_in = bw[1];
    r->meas_s = ((tm[0] > 0 ? tm[0] : 0) + (tm[1] > 0 ? tm[1] : 0)) / have * 1e-6;
}

/* Whether tokens t[0..n) begin one of the comment lines nccl-tests prints
 * (src/util.cu, src/common.cu) other than those read for their content: a
 * paste whose '#' a markdown renderer ate still has their words. */
static int eaten_comment(char **t, int n)
{
    static const char *const starts[][2] = {
        {"Using", "devices"}, {"(B)", NULL}, {"out-of-place", NULL}, {"Out", "of"}, {"Blocking", "Enabled:"},
        {"nccl-tests", "version"}, {"Reducing", "maxBytes"}, {"Per-Iteration", "Report:"},
        {"Parallel", "Init"}, {"GPU", "memory"},
    };
    for (size_t i = 0; i < sizeof starts / sizeof starts[0]; i++)
        if (strcmp(t[0], starts[i][0]) == 0 && (!starts[i][1] || (n > 1 && strcmp(t[1], starts[i][1]) == 0)))
            return 1;
    return 0;
}

/* mpirun --tag-output's prefix ("[1,0]<stdout>:", "[0] "), if s has one:
 * the text after it. */
static char *skip_tag(char *s)
{
    if (*s != '[' || !isdigit((unsigned char)s[1]))
        return s;
    char *p = s + 1;
    while (isdigit((unsigned char)*p) || *p == ',')
        p++;
    if (*p++ != ']')
        return s;
    if (strncmp(p, "<stdout>", 8) == 0 || strncmp(p, "<stderr>", 8) == 0)
        p += 8;
    if (*p == ':')
        p++;
    while (isspace((unsigned char)*p))
        p++;
    return p;
}

static void parse_file(nt_file *f)
{
    FILE *in = fopen(f->path, "r");
    if (!in)
        die_at(f->path, 0, "%s", strerror(errno));
    struct stat st;
    if (fstat(fileno(in), &st) == 0 && !S_ISREG(st.st_mode)) {
        fclose(in);
        die_at(f->path, 0, "not a regular file");
    }
    f->rows = calloc(MAX_ROWS, sizeof *f->rows);
    host_count *hosts = calloc(MAX_RANKS, sizeof *hosts);
    unsigned char *seen = calloc(MAX_RANKS, 1);
    int *seen_line = calloc(MAX_RANKS, sizeof *seen_line);
    if (!f->rows || !hosts || !seen || !seen_line) {
        fprintf(stderr, "ulysses-sim: out of memory\n");
        exit(1);
    }
    f->footer_avg = -1;
    char buf[8192];
    int line = 0, maxrank = -1;
    while (fgets(buf, sizeof buf, in)) {
        line++;
        size_t l = strlen(buf);
        if (l == sizeof buf - 1 && buf[l - 1] != '\n')
            die_at(f->path, line, "a line longer than %zu characters", sizeof buf - 2);
        for (size_t i = 0; i < l; i++)
            if (buf[i] == 0 || (!isprint((unsigned char)buf[i]) && !isspace((unsigned char)buf[i])))
                die_at(f->path, line, "not text (byte 0x%02x)", (unsigned char)buf[i]);
        char *s = buf;
        while (isspace((unsigned char)*s))
            s++;
        s = skip_tag(s);
        int comment = *s == '#';
        if (comment)
            s++;
        /* the raw text, for the lines recognised by their words */
        char raw[8192];
        snprintf(raw, sizeof raw, "%s", s);
        char *t[MAX_TOK + 1];
        int n = tokenize(s, t, MAX_TOK);
        if (n == 0)
            continue;
        if (n > MAX_TOK)
            die_at(f->path, line, "more than %d fields", MAX_TOK);
        int64_t v;
        if (strcmp(t[0], "nThread") == 0) {
            int64_t a = 0, b = 0;
            if (n < 4 || strcmp(t[2], "nGpus") != 0 || !is_int(t[1], &a) || !is_int(t[3], &b) || a < 1 || b < 1)
                die_at(f->path, line, "a run line that is not \"# nThread N nGpus G ...\"");
            if (f->run_line)
                die_at(f->path, line, "a second \"# nThread\" run line (the first is at line %d): one nccl-tests "
                                      "run per file (several processes each printing one mean nccl-tests was "
                                      "built without MPI=1: independent runs, not one)", f->run_line);
            f->run_line = line;
            f->nthread = (int)a;
            f->ngpus_proc = (int)b;
        } else if (strcmp(t[0], "Rank") == 0) {
            int on = -1;
            for (int i = 2; i + 1 < n; i++)
                if (strcmp(t[i], "on") == 0) {
                    on = i;
                    break;
                }
            if (n < 4 || !is_int(t[1], &v) || v < 0 || v >= MAX_RANKS || on < 0)
                die_at(f->path, line, "a rank line that is not \"#  Rank R [Group G] Pid P on HOST device D\"");
            if (seen[v])
                die_at(f->path, line, "rank %lld listed twice (also at line %d)", (long long)v, seen_line[v]);
            if (f->header_line)
                die_at(f->path, line, "a rank line after the column header");
            seen[v] = 1;
            seen_line[v] = line;
            maxrank = (int)v > maxrank ? (int)v : maxrank;
            f->nranks++;
            /* ranks come host by host: the last host first */
            int h = f->nhosts && strcmp(hosts[f->nhosts - 1].name, t[on + 1]) == 0 ? f->nhosts - 1 : 0;
            while (h < f->nhosts && strcmp(hosts[h].name, t[on + 1]) != 0)
                h++;
            if (h == f->nhosts) {
                snprintf(hosts[h].name, sizeof hosts[h].name, "%s", t[on + 1]);
                f->nhosts++;
            }
            hosts[h].n++;
        } else if ((strcmp(t[0], "size") == 0 || strcmp(t[0], "bytes") == 0) && n > 4) {
            read_header(f, t, n, line);
        } else if (is_int(t[0], &v) && !comment) {
            read_row(f, t, n, line);
        } else if (strcmp(t[0], "Avg") == 0 && n >= 5 && strcmp(t[1], "bus") == 0 &&
                   strcmp(t[2], "bandwidth") == 0) {
            double a;
            if (strcmp(t[3], ":") != 0 || num_cell(t[4], &a) <= 0)
                die_at(f->path, line, "an \"Avg bus bandwidth\" line without its value");
            f->footer_avg = a;
            f->footer_line = line;
        } else if (strcmp(t[0], "Collective") == 0 && n >= 4 && strcmp(t[1], "test") == 0 &&
                   (strcmp(t[2], "starting:") == 0 || strcmp(t[2], "concluded:") == 0)) {
            int k = kind_parse(base_name(t[3]));
            if (k == -1)
                die_at(f->path, line, "an nccl-tests banner naming '%s', not a known binary", t[3]);
            set_kind(f, k, line, "banner");
        } else if (comment) {
            /* nccl-tests prints everything but its data rows as '#' comments
             * ("Using devices", units, "out-of-place", "Out of bounds
             * values", the version, "Blocking Enabled", ...); one that
             * reports a failure is an error, the others carry nothing the
             * fit uses */
            if (strcmp(t[0], "error:") == 0 || strcmp(t[0], "ERROR:") == 0)
                die_at(f->path, line, "the run reported an error");
        } else if (strstr(raw, " NCCL INFO ") || strstr(raw, " NCCL WARN ") ||
                   (n >= 2 && strcmp(t[0], "NCCL") == 0 && strcmp(t[1], "version") == 0)) {
            f->debug_lines++;   /* NCCL_DEBUG output interleaved with the table */
        } else if (eaten_comment(t, n)) {
            /* the comment lines of a paste whose '#' were eaten */
        } else {
            int k = -1;
            for (int i = 0; i < n && k < 0; i++) {
                const char *b = base_name(t[i]);
                size_t bl = strlen(b);
                if ((bl > 5 && strcmp(b + bl - 5, "_perf") == 0) || (bl > 9 && strcmp(b + bl - 9, "_perf_mpi") == 0))
                    k = kind_parse(b) == -1 ? -3 : kind_parse(b);
            }
            if (k == -3)
                die_at(f->path, line, "a command line naming an nccl-tests binary this program does not know");
            if (k != -1) {
                set_kind(f, k, line, "command line");
                f->command_lines++;
            } else if (t[0][0] == '$' || t[0][0] == '>' || (l >= 2 && buf[l - 2] == '\\')) {
                f->command_lines++;   /* a shell prompt, a continued command line */
            } else {
                char short_[64];
                snprintf(short_, sizeof short_, "%.60s", raw);
                short_[strcspn(short_, "\r\n")] = 0;
                die_at(f->path, line, "not nccl-tests output: '%s'", short_);
            }
        }
    }
    int err = ferror(in);
    fclose(in);
    if (err)
        die_at(f->path, 0, "read error");
    if (!f->header_line)
        die_at(f->path, 0, "no column header (\"# size count type ... time algbw busbw\"): not nccl-tests output");
    if (f->nrows == 0)
        die_at(f->path, 0, "no data row with a size above 0 and a time");
    if (f->nranks) {
        if (maxrank + 1 != f->nranks) {
            int miss = 0;
            while (seen[miss])
                miss++;
            die_at(f->path, 0, "%d rank lines, but rank %d is missing (ranks 0-%d expected)", f->nranks, miss,
                   f->nranks - 1);
        }
        f->per_host = hosts[0].n;
        for (int h = 1; h < f->nhosts; h++)
            if (hosts[h].n != f->per_host) {
                char h0[OUT_SAFE], hh[OUT_SAFE];
                die_at(f->path, 0, "host %s has %d GPUs but host %s has %d: the simulator places whole nodes "
                                   "of one size", out_safe(hosts[0].name, h0), hosts[0].n,
                       out_safe(hosts[h].name, hh), hosts[h].n);
            }
    }
    free(hosts);
    free(seen);
    free(seen_line);
}

/* ------------------------------------------------------------ prediction */

/* The time of one nccl-tests point on platform p: the collective built as
 * `ulysses-sim coll` builds it (sim/cli/coll.c), sendrecv as a ring shift
 * (nccl-tests' sendrecv: every rank sends S to rank + 1). */
static int predict(const usim_platform *p, int kind, int G, uint64_t S, double *t_s, usim_coll_result *r)
{
    usim_net *net = usim_net_new(p, G);
    int *ranks = malloc((size_t)G * sizeof *ranks);
    uint64_t *chunks = malloc((size_t)G * sizeof *chunks);
    usim_coll_type type = kinds[kind].type;
    uint64_t *pairs = type == USIM_A2A_DIRECT ? malloc((size_t)G * G * sizeof *pairs) : NULL;
    if (!net || !ranks || !chunks || (type == USIM_A2A_DIRECT && !pairs)) {
        fprintf(stderr, "ulysses-sim: out of memory\n");
        exit(1);
    }
    for (int i = 0; i < G; i++)
        ranks[i] = i;
    usim_coll c;
    memset(&c, 0, sizeof c);
    c.type = type;
    c.ngroups = 1;
    c.size = G;
    c.ranks = ranks;
    if (type == USIM_A2A_DIRECT) {
        for (int s = 0; s < G; s++)
            for (int d = 0; d < G; d++)
                pairs[(size_t)s * G + d] = S / (uint64_t)G + ((uint64_t)d < S % (uint64_t)G);
        c.pair_bytes = pairs;
    } else if (type == USIM_RING_SHIFT) {
        c.bytes = S;
    } else {
        for (int q = 0; q < G; q++)
            chunks[q] = S / (uint64_t)G + ((uint64_t)q < S % (uint64_t)G);
        c.chunk_bytes = chunks;
    }
    int rc = usim_coll_run(net, &c, r, NULL, NULL);
    usim_net_free(net);
    free(ranks);
    free(chunks);
    free(pairs);
    if (rc)
        return rc;
    if (r->duration >= USIM_TIME_LIMIT_PS || r->duration <= 0)
        return -1;   /* saturated or empty: not a time */
    *t_s = (double)r->duration * 1e-12;
    return 0;
}

/* Every row's prediction on p into pred[] (and the algorithm, protocol run),
 * rows of every file in order.  0, or -1 when a point cannot be predicted
 * (message in *why). */
static int predict_all(const usim_platform *p, nt_file *f, int nf, double *pred, usim_algo *algo, usim_proto *proto,
                       char *why, size_t nwhy)
{
    int k = 0;
    for (int i = 0; i < nf; i++)
        for (int j = 0; j < f[i].nrows; j++, k++) {
            usim_coll_result r;
            int rc = predict(p, f[i].kind, f[i].gpus, (uint64_t)f[i].rows[j].bytes, &pred[k], &r);
            if (rc) {
                char pn[OUT_SAFE];
                snprintf(why, nwhy, "%s:%d: %s of %lld bytes on %d GPUs: %s", out_safe(f[i].path, pn),
                         f[i].rows[j].line, kinds[f[i].kind].name, (long long)f[i].rows[j].bytes, f[i].gpus,
                         rc < 0 ? "the predicted time is not representable (check the platform's rates)"
                                : usim_last_error());
                return -1;
            }
            if (algo)
                algo[k] = r.algo, proto[k] = r.proto;
        }
    return 0;
}

/* ------------------------------------------------------------ parameters */

enum { P_NVL_EFF, P_NVL_LAT, P_NVL_NCCL, P_NVLS_EFF, P_NIC_EFF, P_NIC_LAT, P_NIC_NCCL, NPARAM };

typedef struct fparam {
    const char *sect, *key;
    double lo, hi;        /* the physical range searched, in file units */
    int decimals;         /* written with this many decimals */
    int used;             /* the platform has it (nvls_efficiency: only with "nvls": true) */
    double before, after; /* file units */
    double sens;          /* max |relative change| of a prediction when it moves by x/÷ 1.25 */
    int identified;
} fparam;

/* file units: efficiencies as fractions, latencies in microseconds */
static double param_get(const usim_platform *p, int k)
{
    switch (k) {
    case P_NVL_EFF: return p->nvl_eff;
    case P_NVL_LAT: return (double)p->nvl_lat / USIM_PS_PER_US;
    case P_NVL_NCCL: return p->nccl_lat_scale[USIM_CLASS_NVLINK] > 0 ? p->nccl_lat_scale[USIM_CLASS_NVLINK] : 1;
    case P_NIC_NCCL: return p->nccl_lat_scale[USIM_CLASS_NIC] > 0 ? p->nccl_lat_scale[USIM_CLASS_NIC] : 1;
    case P_NVLS_EFF: return p->nvls_eff;
    case P_NIC_EFF: return p->nic_eff;
    default: return (double)p->nic_lat / USIM_PS_PER_US;
    }
}

static void param_set(usim_platform *p, int k, double v)
{
    switch (k) {
    case P_NVL_EFF: p->nvl_eff = v; break;
    case P_NVL_LAT: p->nvl_lat = (usim_time)llround(v * USIM_PS_PER_US); break;
    case P_NVL_NCCL: p->nccl_lat_scale[USIM_CLASS_NVLINK] = v; break;
    case P_NIC_NCCL: p->nccl_lat_scale[USIM_CLASS_NIC] = v; break;
    case P_NVLS_EFF: p->nvls_eff = v; break;
    case P_NIC_EFF: p->nic_eff = v; break;
    default: p->nic_lat = (usim_time)llround(v * USIM_PS_PER_US); break;
    }
}

/* The identification threshold: a parameter whose change by a factor 1.25
 * either way moves no prediction by more than this is not identified. */
#define IDENT_MIN 0.005

typedef struct fit_ctx {
    nt_file *f;
    int nf, npts;
    double *meas, *pred;
    long evals;
} fit_ctx;

/* The mean squared relative error on p (HUGE_VAL when a point fails). */
static double objective(fit_ctx *c, const usim_platform *p)
{
    char why[8];
    c->evals++;
    if (predict_all(p, c->f, c->nf, c->pred, NULL, NULL, why, sizeof why))
        return HUGE_VAL;
    double s = 0;
    for (int k = 0; k < c->npts; k++) {
        double e = (c->pred[k] - c->meas[k]) / c->meas[k];
        s += e * e;
    }
    return s / c->npts;
}

/* Parameter k of *p at exp(u) (clamped to its range): the objective. */
static double at(fit_ctx *c, usim_platform *p, const fparam *q, int k, double u)
{
    double v = exp(u);
    v = v < q->lo ? q->lo : v > q->hi ? q->hi : v;
    param_set(p, k, v);
    return objective(c, p);
}

/* One coordinate: a grid scan of its log range (round 0: all of it, in 8
 * steps; round r > 0: 2^(2-r) of those steps either side of the current
 * value, in 4), then golden section in the bracket around the best grid
 * point; *p
 * keeps the best value seen (the current one unless another is better).
 * Returns the objective. */
static double coord_min(fit_ctx *c, usim_platform *p, const fparam *q, int k, double fcur, int round)
{
    const int grid = round ? 5 : 9, golden = round ? 14 : 22;
    double lo = log(q->lo), hi = log(q->hi), step = (hi - lo) / 8;
    double best_v = param_get(p, k), best_f = fcur;
    double g0 = lo, g1 = hi;
    if (round) {
        double u = log(best_v), half = ldexp(step, 2 - (round < 8 ? round : 8));
        g0 = u - half < lo ? lo : u - half;
        g1 = u + half > hi ? hi : u + half;
    }
    double gs = (g1 - g0) / (grid - 1), center = log(best_v);
    for (int g = 0; g < grid; g++) {
        double fv = at(c, p, q, k, g0 + gs * g);
        if (fv < best_f) {
            best_f = fv;
            best_v = param_get(p, k);
            center = g0 + gs * g;
        }
    }
    /* the bracket: one grid step either side of the best point */
    double a = center - gs, b = center + gs;
    a = a < lo ? lo : a;
    b = b > hi ? hi : b;
    const double gr = (sqrt(5.0) - 1) / 2;
    double x1 = b - gr * (b - a), x2 = a + gr * (b - a);
    double f1 = at(c, p, q, k, x1), v1 = param_get(p, k);
    double f2 = at(c, p, q, k, x2), v2 = param_get(p, k);
    for (int it = 0; it < golden; it++) {
        if (f1 < best_f) best_f = f1, best_v = v1;
        if (f2 < best_f) best_f = f2, best_v = v2;
        if (f1 <= f2) {
            b = x2, x2 = x1, f2 = f1, v2 = v1;
            x1 = b - gr * (b - a);
            f1 = at(c, p, q, k, x1), v1 = param_get(p, k);
        } else {
            a = x1, x1 = x2, f1 = f2, v1 = v2;
            x2 = a + gr * (b - a);
            f2 = at(c, p, q, k, x2), v2 = param_get(p, k);
        }
    }
    if (f1 < best_f) best_f = f1, best_v = v1;
    if (f2 < best_f) best_f = f2, best_v = v2;
    param_set(p, k, best_v);
    return best_f;
}

/* After a round: the move of the whole round, extrapolated (Hooke and
 * Jeeves' pattern move: coordinates that pull together converge slowly one
 * at a time); *p takes the best of 1.5, 2, 3 and 4 times the move if one is
 * better.  prev: the values before the round. */
static double pattern_move(fit_ctx *c, usim_platform *p, const fparam *q, const double *prev, double fcur)
{
    static const double ts[] = {1.5, 2, 3, 4};
    double now[NPARAM], best_t = 1;
    for (int k = 0; k < NPARAM; k++)
        now[k] = param_get(p, k);
    for (int i = 0; i < 4; i++) {
        usim_platform t = *p;
        for (int k = 0; k < NPARAM; k++)
            if (q[k].used && q[k].identified && prev[k] > 0 && now[k] > 0) {
                double v = exp(log(prev[k]) + ts[i] * (log(now[k]) - log(prev[k])));
                param_set(&t, k, v < q[k].lo ? q[k].lo : v > q[k].hi ? q[k].hi : v);
            }
        double fv = objective(c, &t);
        if (fv < fcur) {
            fcur = fv;
            best_t = ts[i];
        }
    }
    if (best_t > 1)
        for (int k = 0; k < NPARAM; k++)
            if (q[k].used && q[k].identified && prev[k] > 0 && now[k] > 0) {
                double v = exp(log(prev[k]) + best_t * (log(now[k]) - log(prev[k])));
                param_set(p, k, v < q[k].lo ? q[k].lo : v > q[k].hi ? q[k].hi : v);
            }
    return fcur;
}

/* Round v to the decimals it is written with (at least its range's low end). */
static double written(const fparam *q, double v)
{
    double s = pow(10, q->decimals), r = round(v * s) / s;
    return r < q->lo ? q->lo : r > q->hi ? q->hi : r;
}

/* ------------------------------------------------------------ the command */

typedef struct cal_opts {
    const char *platform, *out;
    const char *files[MAX_FILES];
    int nfiles;
    int kind[MAX_FILES], nkind;
    int64_t gpus[MAX_FILES];
    int ngpus;
    int force, json;
} cal_opts;

/* "a,b,c" into items of at most 63 characters each. */
static int split_list(const char *val, char items[][64], int max)
{
    int n = 0;
    const char *s = val;
    for (;;) {
        const char *e = strchr(s, ',');
        size_t l = e ? (size_t)(e - s) : strlen(s);
        if (n == max || l == 0 || l >= 64)
            return -1;
        memcpy(items[n], s, l);
        items[n++][l] = 0;
        if (!e)
            return n;
        s = e + 1;
    }
}

static void cal_parse(cal_opts *o, int argc, char **argv)
{
    memset(o, 0, sizeof *o);
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(calibrate_usage, stdout);
            exit(0);
        }
        if (strcmp(a, "--force") == 0) {
            o->force = 1;
            continue;
        }
        if (strcmp(a, "--json") == 0) {
            o->json = 1;
            continue;
        }
        if (strcmp(a, "--nccl-tests") == 0) {
            int k = 0;
            while (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0) {
                if (o->nfiles == MAX_FILES)
                    die_usage("calibrate: --nccl-tests: at most %d files", MAX_FILES);
                o->files[o->nfiles++] = argv[++i];
                k++;
            }
            if (!k)
                die_usage("calibrate: --nccl-tests needs at least one file");
            continue;
        }
        static const char *const valued[] = {"--platform", "--coll", "--gpus", "--out", "--format", NULL};
        char name[32];
        const char *val = NULL, *eq = strchr(a, '=');
        size_t l = eq ? (size_t)(eq - a) : strlen(a);
        if (strncmp(a, "--", 2) != 0 || l >= sizeof name)
            die_usage("calibrate: unexpected argument '%s' (see ulysses-sim calibrate --help)", a);
        memcpy(name, a, l);
        name[l] = 0;
        if (strcmp(name, "--nccl-tests") == 0 && eq) {
            if (o->nfiles == MAX_FILES)
                die_usage("calibrate: --nccl-tests: at most %d files", MAX_FILES);
            o->files[o->nfiles++] = eq + 1;
            continue;
        }
        int known = 0;
        for (int k = 0; valued[k]; k++)
            known |= strcmp(name, valued[k]) == 0;
        if (!known)
            die_usage("calibrate: unknown option '%s' (see ulysses-sim calibrate --help)", name);
        if (eq)
            val = eq + 1;
        else if (i + 1 < argc)
            val = argv[++i];
        else
            die_usage("calibrate: %s needs a value", name);
        char items[MAX_FILES][64];
        if (strcmp(name, "--platform") == 0) {
            o->platform = val;
        } else if (strcmp(name, "--out") == 0) {
            o->out = val;
        } else if (strcmp(name, "--format") == 0) {
            if (strcmp(val, "json") == 0) o->json = 1;
            else if (strcmp(val, "table") == 0) o->json = 0;
            else die_usage("calibrate: --format: expected table or json, got '%s'", val);
        } else if (strcmp(name, "--coll") == 0) {
            int n = split_list(val, items, MAX_FILES);
            if (n < 0)
                die_usage("calibrate: --coll: expected a collective or a comma-separated list of at most %d, "
                          "got '%s'", MAX_FILES, val);
            for (int k = 0; k < n; k++) {
                int c = kind_parse(items[k]);
                if (c < 0)
                    die_usage("calibrate: --coll: '%s': expected all-reduce, all-gather, reduce-scatter, "
                              "all-to-all or sendrecv (or their nccl-tests binaries)%s", items[k],
                              c == -2 ? "; that nccl-tests binary is not modelled" : "");
                o->kind[k] = c;
            }
            o->nkind = n;
        } else {
            int n = split_list(val, items, MAX_FILES);
            if (n < 0)
                die_usage("calibrate: --gpus: expected a count or a comma-separated list of at most %d, got '%s'",
                          MAX_FILES, val);
            for (int k = 0; k < n; k++)
                if (parse_count(items[k], &o->gpus[k]) || o->gpus[k] < 2 || o->gpus[k] > MAX_RANKS)
                    die_usage("calibrate: --gpus: expected integers in [2, %d], got '%s'", MAX_RANKS, items[k]);
            o->ngpus = n;
        }
    }
    if (!o->platform)
        die_usage("calibrate: --platform is required (the platform to start from)");
    if (!o->nfiles)
        die_usage("calibrate: --nccl-tests FILE... is required");
    if (o->nkind > 1 && o->nkind != o->nfiles)
        die_usage("calibrate: --coll: %d values for %d files (give one for all, or one per file)", o->nkind,
                  o->nfiles);
    if (o->ngpus > 1 && o->ngpus != o->nfiles)
        die_usage("calibrate: --gpus: %d values for %d files (give one for all, or one per file)", o->ngpus,
                  o->nfiles);
}

/* Today (UTC, or SOURCE_DATE_EPOCH's day) as YYYY-MM-DD. */
static void today(char *buf, size_t n)
{
    time_t t = time(NULL);
    const char *e = getenv("SOURCE_DATE_EPOCH");
    if (e && *e) {
        int64_t v;
        if (is_int(e, &v) && v >= 0)
            t = (time_t)v;
    }
    struct tm tm;
    if (!gmtime_r(&t, &tm) || !strftime(buf, n, "%Y-%m-%d", &tm))
        snprintf(buf, n, "unknown date");
}

/* Resolve a parsed file's collective, GPUs and nodes against the platform. */
static void resolve(nt_file *f, const cal_opts *o, int i, const usim_platform *p)
{
    if (f->kind < 0)
        die_at(f->path, 0, "no banner (\"# Collective test starting: all_reduce_perf\") or command line names the "
                           "collective: give --coll");
    int64_t want = o->ngpus ? o->gpus[o->ngpus > 1 ? i : 0] : 0;
    if (f->nranks) {
        if (want && want != f->nranks)
            die_at(f->path, 0, "--gpus %lld, but the file lists %d ranks", (long long)want, f->nranks);
        f->gpus = f->nranks;
        f->nodes = f->nhosts;
    } else {
        if (!want)
            die_at(f->path, 0, "no \"#  Rank\" lines to count the GPUs from: give --gpus");
        f->gpus = (int)want;
        f->nodes = (f->gpus + p->gpus_per_node - 1) / p->gpus_per_node;
    }
    if (f->gpus < 2)
        die_at(f->path, 0, "a run on one GPU has no communication to fit");
    if (kinds[f->kind].type == USIM_A2A_DIRECT && f->gpus > 2048)
        die_at(f->path, 0, "all-to-all is simulated on at most 2048 GPUs (its pair matrix), the file has %d",
               f->gpus);
    char pn[OUT_SAFE];
    if (f->nhosts == 1 && f->gpus > p->gpus_per_node)
        die_at(f->path, 0, "%d GPUs on one host, but platform %s has %d GPUs per node", f->gpus,
               out_safe(p->name, pn), p->gpus_per_node);
    if (f->nhosts > 1 && f->per_host != p->gpus_per_node)
        die_at(f->path, 0, "%d hosts x %d GPUs, but platform %s has %d GPUs per node (the simulator places whole "
                           "nodes)", f->nhosts, f->per_host, out_safe(p->name, pn), p->gpus_per_node);
    if (usim_platform_check_gpus(p, f->gpus))
        die_at(f->path, 0, "%s", usim_last_error());
}

/* The calibrated platform: the input file's JSON with the fitted keys,
 * the name, the description and calibration.nccl_tests replaced. */
static json_t *calibrated_json(const char *src, const usim_platform *p, const fparam *q, const cal_opts *o,
                               const char *date, double rms0, double rms1, int npts)
{
    json_error_t e;
    json_t *root = json_load_file(src, JSON_REJECT_DUPLICATES, &e);
    if (!root || !json_is_object(root)) {
        json_decref(root);
        return NULL;
    }
    int bad = 0;
    char name[64];
    const char *suffix = "-calibrated";
    size_t nl = strlen(p->name), sl = strlen(suffix);
    if (nl >= sl && strcmp(p->name + nl - sl, suffix) == 0)
        snprintf(name, sizeof name, "%s", p->name);
    else
        snprintf(name, sizeof name, "%.*s%s", (int)(sizeof name - 1 - sl), p->name, suffix);
    bad |= uly_json_set_str(root, "name", name);
    char desc[4096];
    json_t *d0 = json_object_get(root, "description");
    size_t len = (size_t)snprintf(desc, sizeof desc, "%s%scalibrated from", json_is_string(d0) ? json_string_value(d0) : "",
                                  json_is_string(d0) ? "; " : "");
    for (int i = 0; i < o->nfiles && len < sizeof desc; i++)
        len += (size_t)snprintf(desc + len, sizeof desc - len, "%s %s", i ? "," : "", o->files[i]);
    if (len < sizeof desc)
        snprintf(desc + len, sizeof desc - len, " on %s (ulysses-sim calibrate)", date);
    bad |= uly_json_set_str(root, "description", desc);
    json_t *cal = json_object_get(root, "calibration");
    if (!json_is_object(cal)) {
        json_t *prev = cal ? json_incref(cal) : NULL;
        cal = uly_json_add_object(root, "calibration");
        if (!cal)
            return json_decref(root), json_decref(prev), NULL;
        if (prev)
            bad |= json_object_set_new(cal, "previous", prev);
    }
    json_t *nt = uly_json_add_object(cal, "nccl_tests");
    json_t *files = nt ? uly_json_add_array(nt, "files") : NULL;
    json_t *fit = nt ? uly_json_add_object(nt, "fitted") : NULL;
    json_t *unid = nt ? uly_json_add_array(nt, "not_identified") : NULL;
    json_t *edge = nt ? uly_json_add_array(nt, "at_range_end") : NULL;
    if (!files || !fit || !unid || !edge)
        return json_decref(root), NULL;
    bad |= uly_json_set_str(nt, "tool", "ulysses-sim calibrate");
    bad |= uly_json_set_str(nt, "date", date);
    for (int i = 0; i < o->nfiles; i++)
        bad |= uly_json_append_str(files, o->files[i]);
    bad |= uly_json_set_int(nt, "points", npts);
    bad |= uly_json_set_real(nt, "rms_residual_before_pct", rms0);
    bad |= uly_json_set_real(nt, "rms_residual_after_pct", rms1);
    for (int k = 0; k < NPARAM; k++) {
        if (!q[k].used)
            continue;
        char full[64];
        snprintf(full, sizeof full, "%s.%s", q[k].sect, q[k].key);
        if (!q[k].identified) {
            bad |= uly_json_append_str(unid, full);
            continue;
        }
        json_t *sect = json_object_get(root, q[k].sect);
        if (!json_is_object(sect))
            return json_decref(root), NULL;
        bad |= uly_json_set_fixed(sect, q[k].key, q[k].after, q[k].decimals);
        if (q[k].after <= q[k].lo || q[k].after >= q[k].hi)
            bad |= uly_json_append_str(edge, full);
        json_t *one = uly_json_add_object(fit, full);
        if (!one)
            return json_decref(root), NULL;
        bad |= uly_json_set_real(one, "before", q[k].before);
        bad |= uly_json_set_fixed(one, "after", q[k].after, q[k].decimals);
    }
    if (bad)
        return json_decref(root), NULL;
    return root;
}

int cmd_calibrate(int argc, char **argv);

int cmd_calibrate(int argc, char **argv)
{
    cal_opts o;
    cal_parse(&o, argc, argv);
    usim_platform p;
    char ppath[1024];
    if (usim_preset_path("platforms", o.platform, ppath, sizeof ppath) || usim_platform_load(ppath, &p))
        die_usage("calibrate: --platform: %s", usim_last_error());
    nt_file *f = calloc((size_t)o.nfiles, sizeof *f);
    if (!f) {
        fprintf(stderr, "ulysses-sim: out of memory\n");
        return 1;
    }
    int npts = 0;
    for (int i = 0; i < o.nfiles; i++) {
        f[i].path = o.files[i];
        f[i].kind = -1;
        if (o.nkind) {
            f[i].kind = o.kind[o.nkind > 1 ? i : 0];
            snprintf(f[i].kind_from, sizeof f[i].kind_from, "--coll option");
        }
        parse_file(&f[i]);
        resolve(&f[i], &o, i, &p);
        npts += f[i].nrows;
    }
    /* the output: refused before any fitting when it exists or is an input */
    uly_out out[1];
    uly_in ins[MAX_FILES + 1];
    memset(out, 0, sizeof out);
    memset(ins, 0, sizeof ins);
    ins[0] = (uly_in){.path = ppath, .what = "--platform"};
    for (int i = 0; i < o.nfiles; i++)
        ins[i + 1] = (uly_in){.path = o.files[i], .what = "--nccl-tests"};
    if (o.out) {
        struct stat st;
        if (!o.force && lstat(o.out, &st) == 0) {
            char pn[OUT_SAFE];
            die_usage("calibrate: --out %s exists (give --force to replace it)", out_safe(o.out, pn));
        }
        out[0].path = o.out;
        out[0].what = "--out";
        files_prepare(out, 1, ins, o.nfiles + 1);
    }

    double *meas = malloc((size_t)npts * sizeof *meas), *pred = malloc((size_t)npts * sizeof *pred);
    double *base = malloc((size_t)npts * sizeof *base);
    usim_algo *algo = malloc((size_t)npts * sizeof *algo);
    usim_proto *proto = malloc((size_t)npts * sizeof *proto);
    if (!meas || !pred || !base || !algo || !proto) {
        fprintf(stderr, "ulysses-sim: out of memory\n");
        return 1;
    }
    for (int i = 0, k = 0; i < o.nfiles; i++)
        for (int j = 0; j < f[i].nrows; j++)
            meas[k++] = f[i].rows[j].meas_s;
    char why[1200];
    if (predict_all(&p, f, o.nfiles, base, NULL, NULL, why, sizeof why))
        die_usage("calibrate: %s", why);
    fit_ctx c = {.f = f, .nf = o.nfiles, .npts = npts, .meas = meas, .pred = pred};

    /* the ranges searched: efficiencies a fraction; the point-to-point
     * latencies (send/recv, ring shifts, all-to-all) per step from well under
     * NCCL's own NVLink and network figures (hwLatencies in
     * src/graph/tuning.cc: 0.6 / 1.9 / 3.4 us NVLink, 2.7 / 4.0 / 14 us
     * network for LL / LL128 / Simple) to several times their largest, a
     * socket network's steps included across nodes; the collectives' latency
     * is NCCL's table (tuner.c), fitted as a factor on it per link class,
     * 0.1 to 20 (the NVLink factor also carries NCCL's per-call baseLat) */
    fparam q[NPARAM] = {
        [P_NVL_EFF] = {"intra_node", "efficiency", 0.02, 1.0, 4, 1, 0, 0, 0, 0},
        [P_NVL_LAT] = {"intra_node", "latency_us", 0.05, 20, 3, 1, 0, 0, 0, 0},
        [P_NVLS_EFF] = {"intra_node", "nvls_efficiency", 0.02, 1.0, 4, p.nvls, 0, 0, 0, 0},
        [P_NIC_EFF] = {"inter_node", "efficiency", 0.02, 1.0, 4, 1, 0, 0, 0, 0},
        [P_NIC_LAT] = {"inter_node", "latency_us", 0.05, 200, 3, 1, 0, 0, 0, 0},
        [P_NVL_NCCL] = {"intra_node", "nccl_latency_scale", 0.1, 20, 3, 1, 0, 0, 0, 0},
        [P_NIC_NCCL] = {"inter_node", "nccl_latency_scale", 0.1, 20, 3, 1, 0, 0, 0, 0},
    };
    usim_platform w = p;
    for (int k = 0; k < NPARAM; k++) {
        q[k].before = q[k].after = param_get(&p, k);
        if (!q[k].used)
            continue;
        /* identification: does any point move when it moves by x/÷ 1.25? */
        double v0 = q[k].before < q[k].lo ? q[k].lo : q[k].before > q[k].hi ? q[k].hi : q[k].before;
        for (int s = 0; s < 2; s++) {
            double v = s ? v0 / 1.25 : v0 * 1.25;
            v = v < q[k].lo ? q[k].lo : v > q[k].hi ? q[k].hi : v;
            usim_platform t = p;
            param_set(&t, k, v);
            if (predict_all(&t, f, o.nfiles, pred, NULL, NULL, why, sizeof why))
                continue;   /* a trial the model cannot run says nothing */
            for (int j = 0; j < npts; j++) {
                double r = fabs(pred[j] / base[j] - 1);
                q[k].sens = r > q[k].sens ? r : q[k].sens;
            }
        }
        q[k].identified = q[k].sens >= IDENT_MIN;
        if (q[k].identified)
            param_set(&w, k, v0);
    }
    double f0 = 0;
    for (int j = 0; j < npts; j++)
        f0 += (base[j] - meas[j]) / meas[j] * ((base[j] - meas[j]) / meas[j]);
    f0 /= npts;
    int nfit = 0, rounds = 0;
    for (int k = 0; k < NPARAM; k++)
        nfit += q[k].used && q[k].identified;
    double fcur = nfit ? objective(&c, &w) : f0;
    /* rounds until the RMS residual improves by less than 0.001 % (a
     * hundredth of nccl-tests' 2-decimal rounding of a 10 us time) */
    while (nfit && rounds < 8) {
        double fprev = fcur, prev[NPARAM];
        for (int k = 0; k < NPARAM; k++)
            prev[k] = param_get(&w, k);
        for (int k = 0; k < NPARAM; k++)
            if (q[k].used && q[k].identified)
                fcur = coord_min(&c, &w, &q[k], k, fcur, rounds);
        if (rounds)
            fcur = pattern_move(&c, &w, q, prev, fcur);
        rounds++;
        if (sqrt(fprev) - sqrt(fcur) < 1e-5)
            break;
    }
    /* the values as written, and the predictions with them */
    for (int k = 0; k < NPARAM; k++)
        if (q[k].used && q[k].identified) {
            q[k].after = written(&q[k], param_get(&w, k));
            param_set(&w, k, q[k].after);
        }
    if (predict_all(&w, f, o.nfiles, pred, algo, proto, why, sizeof why))
        die_usage("calibrate: %s", why);
    double f1 = 0;
    for (int i = 0, k = 0; i < o.nfiles; i++)
        for (int j = 0; j < f[i].nrows; j++, k++) {
            nt_row *r = &f[i].rows[j];
            r->before_s = base[k];
            r->after_s = pred[k];
            r->algo = algo[k];
            r->proto = proto[k];
            f1 += (pred[k] - meas[k]) / meas[k] * ((pred[k] - meas[k]) / meas[k]);
        }
    f1 /= npts;
    double rms0 = sqrt(f0) * 100, rms1 = sqrt(f1) * 100;

    /* notes on what was read and not fitted */
    for (int i = 0; i < o.nfiles; i++) {
        char pn[OUT_SAFE];
        out_safe(f[i].path, pn);
        if (f[i].zero_rows)
            fprintf(stderr, "ulysses-sim: note: %s: %d row%s of 0 bytes not fitted (no data moves)\n", pn,
                    f[i].zero_rows, f[i].zero_rows > 1 ? "s" : "");
        if (f[i].failed_rows)
            fprintf(stderr, "ulysses-sim: note: %s: %d row%s with #wrong > 0 not fitted (failed validation)\n", pn,
                    f[i].failed_rows, f[i].failed_rows > 1 ? "s" : "");
        if (f[i].na_rows)
            fprintf(stderr, "ulysses-sim: note: %s: %d row%s without a time (N/A) not fitted\n", pn, f[i].na_rows,
                    f[i].na_rows > 1 ? "s" : "");
        if (f[i].debug_lines)
            fprintf(stderr, "ulysses-sim: note: %s: skipped %d NCCL debug line%s\n", pn, f[i].debug_lines,
                    f[i].debug_lines == 1 ? "" : "s");
        if (f[i].command_lines)
            fprintf(stderr, "ulysses-sim: note: %s: skipped %d command line%s\n", pn, f[i].command_lines,
                    f[i].command_lines == 1 ? "" : "s");
        if (f[i].footer_avg >= 0 && f[i].bw_n) {
            double avg = f[i].bw_sum / f[i].bw_n;
            if (fabs(avg - f[i].footer_avg) > 0.01 * f[i].footer_avg + 0.01)
                fprintf(stderr, "ulysses-sim: note: %s:%d: the table's busbw average is %.3g GB/s, the footer says "
                                "%.3g: rows missing from the paste?\n", pn, f[i].footer_line, avg, f[i].footer_avg);
        }
    }

    if (nfit && npts < 2 * nfit)
        fprintf(stderr, "ulysses-sim: note: %d points for %d parameters: the fit is barely determined (measure "
                        "more sizes)\n", npts, nfit);

    /* the platform file, checked by the loader before it replaces anything */
    char date[32];
    today(date, sizeof date);
    if (o.out) {
        json_t *root = calibrated_json(ppath, &p, q, &o, date, rms0, rms1, npts);
        FILE *of = root ? files_open(&out[0]) : NULL;
        if (!root || !of) {
            if (!root)
                fprintf(stderr, "ulysses-sim: calibrate: cannot build the platform JSON of %s\n", ppath);
            json_decref(root);
            return 1;
        }
        int bad = uly_json_dump(of, root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
        if (files_ready(&out[0], of) || bad)
            return 1;
        usim_platform chk;
        if (usim_platform_load(out[0].tmp, &chk)) {
            fprintf(stderr, "ulysses-sim: calibrate: the calibrated platform does not load back: %s\n",
                    usim_last_error());
            return 1;
        }
        if (files_commit())
            return 1;
        char pn[OUT_SAFE];
        fprintf(stderr, "ulysses-sim: wrote %s (platform %s)\n", out_safe(o.out, pn), chk.name);
    }

    char pn[OUT_SAFE];
    if (o.json) {
        json_t *root = json_object(), *arr = NULL, *pa = NULL;
        int bad = !root;
        if (!bad) {
            bad |= uly_json_set_str(root, "platform", p.name);
            bad |= uly_json_set_int(root, "points", npts);
            bad |= !(arr = uly_json_add_array(root, "files"));
        }
        for (int i = 0; i < o.nfiles && !bad; i++) {
            json_t *fo = uly_json_append_object(arr), *rows = NULL;
            if (!fo) {
                bad = 1;
                break;
            }
            bad |= uly_json_set_str(fo, "file", f[i].path);
            bad |= uly_json_set_str(fo, "collective", kinds[f[i].kind].name);
            bad |= uly_json_set_str(fo, "collective_from", f[i].kind_from);
            bad |= uly_json_set_int(fo, "gpus", f[i].gpus);
            bad |= uly_json_set_int(fo, "nodes", f[i].nodes);
            bad |= uly_json_set_bool(fo, "nodes_from_ranks", f[i].nranks > 0);
            bad |= !(rows = uly_json_add_array(fo, "rows"));
            for (int j = 0; j < f[i].nrows && !bad; j++) {
                const nt_row *r = &f[i].rows[j];
                json_t *ro = uly_json_append_object(rows);
                if (!ro) {
                    bad = 1;
                    break;
                }
                bad |= uly_json_set_int(ro, "bytes", r->bytes);
                bad |= uly_json_set_str(ro, "type", r->type);
                bad |= uly_json_set_int(ro, "line", r->line);
                bad |= uly_json_set_real(ro, "measured_us", r->meas_s * 1e6);
                bad |= uly_json_set_real(ro, "fitted_us", r->after_s * 1e6);
                bad |= uly_json_set_real(ro, "residual_pct", (r->after_s / r->meas_s - 1) * 100);
                bad |= uly_json_set_real(ro, "before_us", r->before_s * 1e6);
                bad |= uly_json_set_str(ro, "algorithm", kinds[f[i].kind].type == USIM_A2A_DIRECT ? "direct"
                                        : kinds[f[i].kind].type == USIM_RING_SHIFT ? "p2p"
                                                                                   : usim_algo_name(r->algo));
                bad |= uly_json_set_str(ro, "protocol", usim_proto_name(r->proto));
            }
        }
        if (!bad)
            bad |= !(pa = uly_json_add_array(root, "parameters"));
        for (int k = 0; k < NPARAM && !bad; k++) {
            if (!q[k].used)
                continue;
            json_t *po = uly_json_append_object(pa);
            char full[64];
            snprintf(full, sizeof full, "%s.%s", q[k].sect, q[k].key);
            if (!po) {
                bad = 1;
                break;
            }
            bad |= uly_json_set_str(po, "key", full);
            bad |= uly_json_set_real(po, "before", q[k].before);
            bad |= uly_json_set_real(po, "after", q[k].after);
            bad |= uly_json_set_real(po, "sensitivity_pct", q[k].sens * 100);
            bad |= uly_json_set_bool(po, "identified", q[k].identified);
            bad |= uly_json_set_bool(po, "at_bound", q[k].identified && (q[k].after <= q[k].lo || q[k].after >= q[k].hi));
            bad |= uly_json_set_real(po, "range_lo", q[k].lo);
            bad |= uly_json_set_real(po, "range_hi", q[k].hi);
        }
        if (!bad) {
            bad |= uly_json_set_real(root, "rms_residual_before_pct", rms0);
            bad |= uly_json_set_real(root, "rms_residual_after_pct", rms1);
            bad |= uly_json_set_int(root, "rounds", rounds);
            bad |= uly_json_set_int(root, "simulations", (int64_t)c.evals * npts);
            bad |= o.out ? uly_json_set_str(root, "out", o.out) : json_object_set_new(root, "out", json_null());
        }
        if (uly_json_emit(stdout, root, bad, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII |
                                                 JSON_REAL_PRECISION(10))) {
            fprintf(stderr, "ulysses-sim: calibrate: cannot write the JSON output (out of memory or write error)\n");
            return 1;
        }
    } else {
        printf("calibrating %s to %d nccl-tests file%s (%d points)\n", out_safe(p.name, pn), o.nfiles,
               o.nfiles > 1 ? "s" : "", npts);
        for (int i = 0; i < o.nfiles; i++) {
            char fn[OUT_SAFE];
            printf("\n%s on %d GPUs, %d node%s (%s), collective from the %s, in %s\n", kinds[f[i].kind].name,
                   f[i].gpus, f[i].nodes, f[i].nodes > 1 ? "s" : "",
                   f[i].nranks ? "from the rank lines" : "--gpus, whole nodes", f[i].kind_from,
                   out_safe(f[i].path, fn));
            printf("%14s %9s %14s %12s %13s %12s %10s %9s\n", "size [B]", "type", "measured [us]", "fitted [us]",
                   "residual [%]", "before [us]", "algorithm", "protocol");
            for (int j = 0; j < f[i].nrows; j++) {
                const nt_row *r = &f[i].rows[j];
                char tn[OUT_SAFE];
                printf("%14lld %9s %14.2f %12.2f %13.2f %12.2f %10s %9s\n", (long long)r->bytes,
                       out_safe(r->type, tn), r->meas_s * 1e6, r->after_s * 1e6, (r->after_s / r->meas_s - 1) * 100,
                       r->before_s * 1e6,
                       kinds[f[i].kind].type == USIM_A2A_DIRECT ? "direct"
                       : kinds[f[i].kind].type == USIM_RING_SHIFT ? "p2p" : usim_algo_name(r->algo),
                       usim_proto_name(r->proto));
            }
        }
        printf("\n%-28s %10s %10s %16s  %s\n", "parameter", "before", "after", "sensitivity [%]", "status");
        for (int k = 0; k < NPARAM; k++) {
            if (!q[k].used)
                continue;
            char full[64];
            snprintf(full, sizeof full, "%s.%s", q[k].sect, q[k].key);
            int edge = q[k].identified && (q[k].after <= q[k].lo || q[k].after >= q[k].hi);
            char st[160];
            if (!q[k].identified)
                snprintf(st, sizeof st, "not identified (unchanged: no point moves 0.5 %% when it moves 25 %%)");
            else if (edge)
                snprintf(st, sizeof st, "fitted, at the %s end of its range [%g, %g]: the model cannot follow the data",
                         q[k].after <= q[k].lo ? "low" : "high", q[k].lo, q[k].hi);
            else
                snprintf(st, sizeof st, "fitted");
            printf("%-28s %10.*f %10.*f %16.2f  %s\n", full, q[k].decimals, q[k].before, q[k].decimals, q[k].after,
                   q[k].sens * 100, st);
        }
        printf("\nRMS residual: before %.2f %%, after %.2f %% (%d points, %d round%s, %ld simulations)\n", rms0, rms1,
               npts, rounds, rounds == 1 ? "" : "s", c.evals * npts);
        if (!o.out)
            printf("the calibrated platform was not written (no --out)\n");
    }
    for (int i = 0; i < o.nfiles; i++)
        free(f[i].rows);
    free(f);
    free(meas);
    free(pred);
    free(base);
    free(algo);
    free(proto);
    if (fflush(stdout)) {
        fprintf(stderr, "ulysses-sim: error writing the output\n");
        return 1;
    }
    return 0;
}
