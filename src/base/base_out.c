/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base_out.c -- output files that are never half-written, never an input,
 * and committed together (see base_out.h).
 *
 * prepare (before computing): stat each destination, resolve its directory,
 * refuse duplicates, inputs, symbolic links, directories and special files; then, output by
 * output, remove the stale temporaries "<dir>/.<name>.tmpXXXXXX" nobody
 * holds locked and create this run's, locked with flock (the lock goes with
 * the process: a killed run's temporary is unlocked).  ready: fsync.
 * commit: check every destination, then rename each -- with
 * RENAME_NOREPLACE when it did not exist, after checking its identity when
 * it did -- then fsync the directories.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base_out.h"

#define TMP_TAG ".tmp"
enum { TMP_RANDOM = 6 }; /* the XXXXXX of mkstemp */

/* Exit status for an errno met while creating or writing a file: the path is
 * wrong (2) or the system failed (1: read-only file system, disk full, I/O). */
static int code_of_errno(int e)
{
    switch (e) {
    case ENOENT: case ENOTDIR: case EACCES: case EPERM: case ENAMETOOLONG: case ELOOP: case EISDIR:
        return ULY_EXIT_BADINPUT;
    default:
        return ULY_EXIT_RUNTIME;
    }
}

/* dir and base of path into the buffers ("." when there is no slash). */
static int split_path(const char *path, char *dir, size_t dlen, char *base, size_t blen)
{
    const char *slash = strrchr(path, '/');
    const char *b = slash ? slash + 1 : path;
    if (strlen(b) >= blen)
        return -1;
    snprintf(base, blen, "%s", b);
    if (!slash)
        snprintf(dir, dlen, ".");
    else if (slash == path)
        snprintf(dir, dlen, "/");
    else if ((size_t)(slash - path) >= dlen)
        return -1;
    else
        snprintf(dir, dlen, "%.*s", (int)(slash - path), path);
    return 0;
}

/* The canonical name of an output: realpath(dir) + "/" + base. */
static int canonical(const uly_out *o, char *out, size_t len)
{
    char dir[PATH_MAX], base[NAME_MAX + 1], real[PATH_MAX];
    if (split_path(o->path, dir, sizeof dir, base, sizeof base))
        return uly_base_set_error(ULY_EXIT_BADINPUT, "%s %s: path too long", o->what, o->path);
    if (!*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
        return uly_base_set_error(ULY_EXIT_BADINPUT, "%s %s: names a directory, not a file", o->what, o->path);
    if (!realpath(dir, real))
        return uly_base_set_error(code_of_errno(errno), "%s %s: directory %s: %s", o->what, o->path, dir,
                                  strerror(errno));
    struct stat st;
    if (stat(real, &st) != 0 || !S_ISDIR(st.st_mode))
        return uly_base_set_error(ULY_EXIT_BADINPUT, "%s %s: %s is not a directory", o->what, o->path, dir);
    if (strlen(real) + strlen(base) + 2 > len)
        return uly_base_set_error(ULY_EXIT_BADINPUT, "%s %s: path too long", o->what, o->path);
    size_t k = strcmp(real, "/") == 0 ? 0 : strlen(real);
    memcpy(out, real, k);
    out[k] = '/';
    memcpy(out + k + 1, base, strlen(base) + 1);
    return 0;
}

/* ---------------------------------------------- removal on SIGTERM/SIGINT/SIGHUP */

/* The temporaries alive in this process, so that a run stopped by SIGTERM
 * (mpirun aborting a job), SIGINT or SIGHUP removes them before it dies.
 * Only signals whose disposition was the default are caught; the handler
 * unlinks (async-signal-safe), restores the default and re-raises. */
enum { LIVE_MAX = 32 };
static char live_path[LIVE_MAX][PATH_MAX];
static volatile sig_atomic_t live_used[LIVE_MAX];
static const int live_signals[] = {SIGTERM, SIGINT, SIGHUP};
static int live_installed;

static void live_handler(int sig)
{
    for (int i = 0; i < LIVE_MAX; i++)
        if (live_used[i])
            unlink(live_path[i]);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void live_install(void)
{
    if (live_installed)
        return;
    live_installed = 1;
    for (size_t k = 0; k < sizeof live_signals / sizeof live_signals[0]; k++) {
        struct sigaction old, sa;
        if (sigaction(live_signals[k], NULL, &old) != 0 || (old.sa_flags & SA_SIGINFO) ||
            old.sa_handler != SIG_DFL)
            continue;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = live_handler;
        sigemptyset(&sa.sa_mask);
        sigaction(live_signals[k], &sa, NULL);
    }
}

/* Register tmp; returns its slot, or -1 when the table is full (the next
 * run's stale-temporary removal still covers it). */
static int live_add(const char *tmp)
{
    if (strlen(tmp) >= PATH_MAX)
        return -1;
    live_install();
    for (int i = 0; i < LIVE_MAX; i++)
        if (!live_used[i]) {
            memcpy(live_path[i], tmp, strlen(tmp) + 1);
            live_used[i] = 1;
            return i;
        }
    return -1;
}

static void live_drop(const char *tmp)
{
    for (int i = 0; i < LIVE_MAX; i++)
        if (live_used[i] && strcmp(live_path[i], tmp) == 0) {
            live_used[i] = 0;
            return;
        }
}

/* Forget o's temporary (closed, its name freed): it was renamed, removed or
 * is kept on purpose. */
static void tmp_forget(uly_out *o)
{
    if (o->tmp)
        live_drop(o->tmp);
    if (o->fd >= 0)
        close(o->fd);
    o->fd = -1;
    uly_base_free(o->tmp);
    o->tmp = NULL;
}

static int64_t mtime_ns(const struct stat *st)
{
    return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

void uly_out_init(uly_out *outs, int n)
{
    for (int i = 0; i < n; i++) {
        outs[i].tmp = NULL;
        outs[i].fd = -1;
        outs[i].ready = outs[i].committed = outs[i].existed = outs[i].stale = 0;
        outs[i].set = outs;
        outs[i].nset = n;
    }
}

int uly_out_check(uly_out *outs, int n, const uly_in *ins, int nin)
{
    char (*canon)[PATH_MAX] = uly_base_calloc((size_t)(n ? n : 1), sizeof *canon);
    if (!canon)
        return uly_base_set_error(ULY_EXIT_RUNTIME, "out of memory checking the outputs");
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        uly_out *o = &outs[i];
        if (!o->path)
            continue;
        struct stat st;
        o->existed = 0;
        /* the rename would replace a symbolic link itself, not the file it
         * names (/dev/stdout -> /proc/self/fd/1 would become a regular file) */
        if (lstat(o->path, &st) == 0 && S_ISLNK(st.st_mode)) {
            rc = uly_base_set_error(ULY_EXIT_BADINPUT,
                                    "%s %s: is a symbolic link; outputs are replaced by renaming, so name the file "
                                    "it points to",
                                    o->what, o->path);
            break;
        }
        if (stat(o->path, &st) == 0) {
            if (!S_ISREG(st.st_mode)) {
                rc = uly_base_set_error(ULY_EXIT_BADINPUT, "%s %s: is %s; outputs must be regular files", o->what,
                                        o->path, uly_file_kind(st.st_mode));
                break;
            }
            o->existed = 1;
            o->dev = (uint64_t)st.st_dev;
            o->ino = (uint64_t)st.st_ino;
            o->mtime_ns = mtime_ns(&st);
            o->size = (int64_t)st.st_size;
        } else if (errno != ENOENT) {
            rc = uly_base_set_error(code_of_errno(errno), "%s %s: %s", o->what, o->path, strerror(errno));
            break;
        }
        if ((rc = canonical(o, canon[i], sizeof canon[i])))
            break;
        for (int j = 0; j < i && !rc; j++) {
            if (!outs[j].path)
                continue;
            if (strcmp(canon[i], canon[j]) == 0 ||
                (o->existed && outs[j].existed && o->dev == outs[j].dev && o->ino == outs[j].ino))
                rc = uly_base_set_error(ULY_EXIT_BADINPUT,
                                        "%s and %s name the same file (%s): each output needs its own path",
                                        outs[j].what, o->what, o->path);
        }
        for (int k = 0; k < nin && !rc && o->existed; k++) {
            const uly_in *in = &ins[k];
            struct stat si;
            if (!in->path || stat(in->path, &si) != 0 || (uint64_t)si.st_dev != o->dev ||
                (uint64_t)si.st_ino != o->ino)
                continue;
            if (in->replaced_by && strcmp(in->replaced_by, o->what) == 0)
                continue;
            rc = uly_base_set_error(ULY_EXIT_BADINPUT,
                                    "%s %s is also an input (%s %s): writing it would destroy the input", o->what,
                                    o->path, in->what, in->path);
        }
    }
    uly_base_free(canon);
    return rc;
}

/* Remove the temporaries of o that no process holds locked (a killed run's). */
static int remove_stale(uly_out *o, const char *dir, const char *base)
{
    DIR *dp = opendir(dir);
    if (!dp)
        return uly_base_set_error(code_of_errno(errno), "%s %s: directory %s: %s", o->what, o->path, dir,
                                  strerror(errno));
    const size_t bl = strlen(base), tl = strlen(TMP_TAG);
    int dfd = dirfd(dp);
    const struct dirent *e;
    while ((e = readdir(dp))) {
        const char *nm = e->d_name;
        if (nm[0] != '.' || strlen(nm) != 1 + bl + tl + TMP_RANDOM || strncmp(nm + 1, base, bl) != 0 ||
            strncmp(nm + 1 + bl, TMP_TAG, tl) != 0)
            continue;
        int fd = openat(dfd, nm, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0)
            continue;
        struct stat st, now;
        /* only a regular file of ours that no live run holds locked, still under that name */
        if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
            flock(fd, LOCK_EX | LOCK_NB) == 0 && fstatat(dfd, nm, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
            now.st_dev == st.st_dev && now.st_ino == st.st_ino && unlinkat(dfd, nm, 0) == 0)
            o->stale++;
        close(fd);
    }
    closedir(dp);
    return 0;
}

static int create_tmp(uly_out *o)
{
    char dir[PATH_MAX], base[NAME_MAX + 1];
    if (split_path(o->path, dir, sizeof dir, base, sizeof base))
        return uly_base_set_error(ULY_EXIT_BADINPUT, "%s %s: path too long", o->what, o->path);
    int rc = remove_stale(o, dir, base);
    if (rc)
        return rc;
    size_t len = strlen(dir) + strlen(base) + strlen(TMP_TAG) + TMP_RANDOM + 3;
    o->tmp = uly_base_malloc(len);
    if (!o->tmp)
        return uly_base_set_error(ULY_EXIT_RUNTIME, "%s %s: out of memory", o->what, o->path);
    for (int tries = 0;; tries++) {
        snprintf(o->tmp, len, "%s/.%s" TMP_TAG "XXXXXX", dir, base);
        o->fd = mkostemp(o->tmp, O_CLOEXEC);
        if (o->fd < 0) {
            int e = errno;
            uly_base_free(o->tmp);
            o->tmp = NULL;
            return uly_base_set_error(code_of_errno(e), "%s %s: cannot create a file in %s: %s", o->what, o->path,
                                      dir, strerror(e));
        }
        /* locked, and still ours under that name: another run's remove_stale
         * may have taken it between mkostemp and flock */
        struct stat a, b;
        if (flock(o->fd, LOCK_EX | LOCK_NB) == 0 && fstat(o->fd, &a) == 0 && a.st_nlink > 0 &&
            lstat(o->tmp, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
            break;
        close(o->fd);
        o->fd = -1;
        if (tries == 8) {
            uly_base_free(o->tmp);
            o->tmp = NULL;
            return uly_base_set_error(ULY_EXIT_RUNTIME, "%s %s: cannot lock a temporary file in %s", o->what,
                                      o->path, dir);
        }
    }
    live_add(o->tmp);
    /* mkostemp makes 0600; give the result the permissions a plain create would */
    mode_t mask = umask(0);
    umask(mask);
    (void)fchmod(o->fd, 0666 & ~mask);
    return 0;
}

int uly_out_prepare(uly_out *outs, int n, const uly_in *ins, int nin)
{
    uly_out_init(outs, n);
    int rc = uly_out_check(outs, n, ins, nin);
    for (int i = 0; i < n && !rc; i++)
        if (outs[i].path)
            rc = create_tmp(&outs[i]);
    if (rc)
        uly_out_discard(outs, n);
    return rc;
}

void uly_out_discard(uly_out *outs, int n)
{
    for (int i = 0; i < n; i++) {
        if (outs[i].tmp)
            unlink(outs[i].tmp);
        tmp_forget(&outs[i]); /* closed after the unlink: the lock covers it until then */
        outs[i].ready = 0;
    }
}

const char *uly_out_note(const uly_out *o, char *buf, size_t len)
{
    buf[0] = '\0';
    if (!o->set)
        return buf;
    int others = 0, committed = 0;
    for (int i = 0; i < o->nset; i++) {
        others += o->set[i].path && &o->set[i] != o;
        committed += o->set[i].path && o->set[i].committed;
    }
    if (!others || committed)
        return buf;
    size_t k = (size_t)snprintf(buf, len, " (no output was replaced:");
    for (int i = 0, first = 1; i < o->nset && k < len; i++)
        if (o->set[i].path) {
            k += (size_t)snprintf(buf + k, len - k, "%s %s", first ? "" : ",", o->set[i].what);
            first = 0;
        }
    if (k < len)
        snprintf(buf + k, len - k, " keep their previous content)");
    return buf;
}

int uly_out_ready(uly_out *o)
{
    char note[512];
    if (!o->tmp || o->fd < 0)
        return uly_base_set_error(ULY_EXIT_RUNTIME, "%s %s: not prepared", o->what, o->path);
    if (fsync(o->fd) != 0) {
        int e = errno;
        return uly_base_set_error(ULY_EXIT_RUNTIME, "%s %s: cannot write: fsync: %s%s", o->what, o->path,
                                  strerror(e), uly_out_note(o, note, sizeof note));
    }
    o->ready = 1;
    return 0;
}

int uly_out_close(uly_out *o, FILE *f)
{
    if (f) {
        errno = 0;
        int bad = fflush(f) != 0 || ferror(f);
        int e = errno;
        bad |= fclose(f) != 0;
        if (bad) {
            char note[512];
            return uly_base_set_error(ULY_EXIT_RUNTIME, "%s %s: cannot write: %s%s", o->what, o->path,
                                      strerror(e ? e : errno ? errno : EIO), uly_out_note(o, note, sizeof note));
        }
    }
    return uly_out_ready(o);
}

/* fsync the directory holding path (so that the rename itself is durable). */
static int sync_dir(const char *path)
{
    char dir[PATH_MAX], base[NAME_MAX + 1];
    if (split_path(path, dir, sizeof dir, base, sizeof base))
        return ENAMETOOLONG;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    int e = fsync(fd) == 0 || errno == EINVAL ? 0 : errno;
    close(fd);
    return e;
}

/* Whether the destination of o is as prepare saw it. */
static int unchanged(const uly_out *o)
{
    struct stat st;
    if (!o->existed)
        return lstat(o->path, &st) != 0 && errno == ENOENT;
    return stat(o->path, &st) == 0 && (uint64_t)st.st_dev == o->dev && (uint64_t)st.st_ino == o->ino &&
           mtime_ns(&st) == o->mtime_ns && (int64_t)st.st_size == o->size;
}

/* " (committed: --out A; not committed: --dq B, --dk C)" after a failure at outs[k]. */
static void midway(const uly_out *outs, int n, char *buf, size_t len)
{
    size_t k = (size_t)snprintf(buf, len, " (committed:");
    for (int pass = 0; pass < 2; pass++) {
        int any = 0;
        for (int i = 0; i < n && k < len; i++)
            if (outs[i].path && outs[i].committed == !pass) {
                k += (size_t)snprintf(buf + k, len - k, "%s %s %s", any ? "," : "", outs[i].what, outs[i].path);
                any = 1;
            }
        if (!any && k < len)
            k += (size_t)snprintf(buf + k, len - k, " none");
        if (pass == 0 && k < len)
            k += (size_t)snprintf(buf + k, len - k, "; not committed:");
    }
    if (k < len)
        snprintf(buf + k, len - k, ")");
}

/* The rename of one output; errno on failure (EEXIST: created meanwhile). */
static int rename_one(uly_out *o)
{
    if (o->existed)
        return rename(o->tmp, o->path) == 0 ? 0 : errno;
    int r = renameat2(AT_FDCWD, o->tmp, AT_FDCWD, o->path, RENAME_NOREPLACE);
    if (r != 0 && (errno == EINVAL || errno == ENOSYS)) {
        /* file system without RENAME_NOREPLACE: link() fails on an existing name too */
        r = link(o->tmp, o->path);
        if (r == 0)
            unlink(o->tmp);
    }
    return r == 0 ? 0 : errno;
}

int uly_out_commit(uly_out *outs, int n)
{
    char note[2048];
    for (int i = 0; i < n; i++) {
        uly_out *o = &outs[i];
        if (!o->path)
            continue;
        if (!o->tmp || o->fd < 0 || !o->ready)
            return uly_base_set_error(ULY_EXIT_RUNTIME, "%s %s: not written%s", o->what, o->path,
                                      uly_out_note(o, note, sizeof note));
    }
    /* nothing is renamed while any destination changed under us */
    for (int i = 0; i < n; i++) {
        uly_out *o = &outs[i];
        if (!o->path || unchanged(o))
            continue;
        int rc = uly_base_set_error(ULY_EXIT_RUNTIME,
                                    "%s %s was %s by another process during this run; not overwritten (this run's "
                                    "result is in %s)%s", o->what, o->path,
                                    o->existed ? "replaced or removed" : "created", o->tmp,
                                    uly_out_note(o, note, sizeof note));
        tmp_forget(o); /* keep the file */
        return rc;
    }
    for (int i = 0; i < n; i++) {
        uly_out *o = &outs[i];
        if (!o->path)
            continue;
        int e = rename_one(o);
        if (e) {
            midway(outs, n, note, sizeof note);
            int rc = e == EEXIST ? uly_base_set_error(ULY_EXIT_RUNTIME,
                                                      "%s %s was created by another process during this run; not "
                                                      "overwritten (this run's result is in %s)%s", o->what,
                                                      o->path, o->tmp, note)
                                 : uly_base_set_error(ULY_EXIT_RUNTIME,
                                                      "%s %s: cannot rename the finished file into place: %s%s",
                                                      o->what, o->path, strerror(e), note);
            if (e == EEXIST)
                tmp_forget(o); /* keep the file */
            return rc;
        }
        o->committed = 1;
        tmp_forget(o);
    }
    for (int i = 0; i < n; i++) {
        if (!outs[i].path)
            continue;
        int e = sync_dir(outs[i].path);
        if (e)
            return uly_base_set_error(ULY_EXIT_RUNTIME, "%s %s: written, but fsync of its directory failed: %s",
                                      outs[i].what, outs[i].path, strerror(e));
    }
    return 0;
}
