/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base_progress.c -- the progress line on stderr (base_progress.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "base_progress.h"

#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

static double mono_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Whether the parent process is Open MPI's mpirun (Linux's /proc). */
static int parent_is_mpirun(void)
{
    char path[64], comm[32] = "";
    snprintf(path, sizeof path, "/proc/%ld/comm", (long)getppid());
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    if (!fgets(comm, sizeof comm, f))
        comm[0] = '\0';
    fclose(f);
    comm[strcspn(comm, "\n")] = '\0';
    return strcmp(comm, "mpirun") == 0 || strcmp(comm, "mpiexec") == 0 || strcmp(comm, "orterun") == 0 ||
           strcmp(comm, "prterun") == 0;
}

int uly_progress_terminal_fd(int fd)
{
    /* A rank started by Open MPI's mpirun writes stdout into a terminal
     * and stderr into a pipe, both of mpirun's making, that mpirun copies
     * to its own: what counts is where mpirun's go (the parent of a rank
     * on mpirun's node is mpirun itself). */
    if (!getenv("OMPI_COMM_WORLD_RANK") || !parent_is_mpirun())
        return isatty(fd);
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/fd/%d", (long)getppid(), fd);
    int pfd = open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK);
    if (pfd < 0)
        return 0;
    int tty = isatty(pfd);
    close(pfd);
    return tty;
}

void uly_progress_begin(uly_progress *p, int enabled, const char *what)
{
    memset(p, 0, sizeof *p);
    p->on = enabled && uly_progress_terminal_fd(2);
    p->interval = 0.25;
    const char *e = getenv("ULYSSES_PROGRESS_INTERVAL");
    if (e && *e) {
        char *end;
        double v = strtod(e, &end);
        if (*end == '\0' && v >= 0 && v <= 60)
            p->interval = v;
        else if (p->on) /* never silent: say that the default is used */
            fprintf(stderr, "note: ULYSSES_PROGRESS_INTERVAL=%s is not a number of seconds in [0, 60]: "
                    "progress lines every %g s\n", e, p->interval);
    }
    snprintf(p->what, sizeof p->what, "%s", what ? what : "");
    p->t0 = mono_seconds();
    p->next = p->t0;
}

/* "12.3 s", "4 min 05 s", "2 h 07 min" */
static void fmt_secs(char *buf, size_t n, double s)
{
    if (s < 60)
        snprintf(buf, n, "%.1f s", s);
    else if (s < 3600)
        snprintf(buf, n, "%d min %02d s", (int)(s / 60), (int)s % 60);
    else
        snprintf(buf, n, "%d h %02d min", (int)(s / 3600), (int)(s / 60) % 60);
}

void uly_progress_show(uly_progress *p, double done, double total, const char *fmt, ...)
{
    if (!p->on)
        return;
    double now = mono_seconds();
    if (now < p->next)
        return;
    p->next = now + p->interval;
    char text[256] = "", pct[16] = "", spent[32], left[64] = "";
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(text, sizeof text, fmt, ap);
        va_end(ap);
    }
    double t = now - p->t0, f = total > 0 ? done / total : 0;
    if (f < 0)
        f = 0;
    if (f > 1)
        f = 1;
    if (total > 0)
        snprintf(pct, sizeof pct, " %3.0f%%", 100 * f);
    fmt_secs(spent, sizeof spent, t);
    if (total > 0 && f > 0 && !p->f1_set) {   /* the rate is measured from the first progress on */
        p->f1_set = 1;
        p->f1 = f;
        p->t1 = t;
    }
    if (p->f1_set && f > p->f1 && f < 1 && t - p->t1 >= 1) {
        char b[32];
        fmt_secs(b, sizeof b, (t - p->t1) * (1 - f) / (f - p->f1));
        snprintf(left, sizeof left, ", about %s left", b);
    }
    char line[512];
    int len = snprintf(line, sizeof line, "%s: %s%s (%s%s)", p->what, text, pct, spent, left);
    if (len < 0)
        return;
    if (len >= (int)sizeof line)
        len = (int)sizeof line - 1;
    /* blank what is left of a longer previous line */
    fprintf(stderr, "\r%s%*s", line, p->len > len ? p->len - len : 0, "");
    fflush(stderr);
    p->len = len;
    p->open = 1;
}

void uly_progress_clear(uly_progress *p)
{
    if (!p->on || !p->open)
        return;
    fprintf(stderr, "\r%*s\r", p->len, "");
    fflush(stderr);
    p->open = 0;
    p->len = 0;
    p->next = 0;
}
