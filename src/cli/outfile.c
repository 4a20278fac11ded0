/*
 * outfile.c -- output files that are never half-written (see drv.h).
 *
 * prepare (before computing): resolve each output's directory, refuse
 * duplicates, outputs that are inputs, directories and special files, and
 * create the temporary file "<dir>/.<name>.tmpXXXXXX" (which proves the
 * directory writable).  commit (after computing): write, fsync, rename over
 * the destination -- with RENAME_NOREPLACE when the destination did not
 * exist, and after checking its identity when it did, so that a concurrent
 * writer is detected instead of silently overwritten -- then fsync the
 * directory.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "cli.h"
#include "drv.h"

/* Exit status for an errno met while creating or writing a file: the path is
 * wrong (2) or the system failed (1: read-only file system, disk full, I/O). */
static int code_of_errno(int e)
{
    switch (e) {
    case ENOENT: case ENOTDIR: case EACCES: case EPERM: case ENAMETOOLONG: case ELOOP: case EISDIR:
        return DRV_BADINPUT;
    default:
        return DRV_RUNTIME;
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
static int canonical(drv *d, const drv_out *o, char *out, size_t len)
{
    char dir[PATH_MAX], base[NAME_MAX + 1], real[PATH_MAX];
    if (split_path(o->path, dir, sizeof dir, base, sizeof base))
        return drv_fail(d, DRV_BADINPUT, "%s %s: path too long", o->what, o->path);
    if (!*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
        return drv_fail(d, DRV_BADINPUT, "%s %s: names a directory, not a file", o->what, o->path);
    if (!realpath(dir, real))
        return drv_fail(d, code_of_errno(errno), "%s %s: directory %s: %s", o->what, o->path, dir, strerror(errno));
    struct stat st;
    if (stat(real, &st) != 0 || !S_ISDIR(st.st_mode))
        return drv_fail(d, DRV_BADINPUT, "%s %s: %s is not a directory", o->what, o->path, dir);
    if (strlen(real) + strlen(base) + 2 > len)
        return drv_fail(d, DRV_BADINPUT, "%s %s: path too long", o->what, o->path);
    size_t k = strcmp(real, "/") == 0 ? 0 : strlen(real);
    memcpy(out, real, k);
    out[k] = '/';
    memcpy(out + k + 1, base, strlen(base) + 1);
    return 0;
}

static int create_tmp(drv *d, drv_out *o)
{
    char dir[PATH_MAX], base[NAME_MAX + 1];
    if (split_path(o->path, dir, sizeof dir, base, sizeof base))
        return drv_fail(d, DRV_BADINPUT, "%s %s: path too long", o->what, o->path);
    size_t len = strlen(dir) + strlen(base) + 16;
    o->tmp = uly_malloc(len);
    if (!o->tmp)
        return drv_fail(d, DRV_RUNTIME, "out of memory preparing %s", o->path);
    snprintf(o->tmp, len, "%s/.%s.tmpXXXXXX", dir, base);
    o->fd = mkstemp(o->tmp);
    if (o->fd < 0) {
        int e = errno;
        uly_free(o->tmp);
        o->tmp = NULL;
        return drv_fail(d, code_of_errno(e), "%s %s: cannot create a file in %s: %s", o->what, o->path, dir,
                        strerror(e));
    }
    /* mkstemp makes 0600; give the result the permissions a plain create would */
    mode_t mask = umask(0);
    umask(mask);
    (void)fchmod(o->fd, 0666 & ~mask);
    return 0;
}

int drv_out_prepare(drv *d, drv_out *outs, int n, const char *const *inputs, int ninputs)
{
    char (*canon)[PATH_MAX] = uly_calloc((size_t)(n ? n : 1), sizeof *canon);
    if (!canon)
        return drv_fail(d, DRV_RUNTIME, "out of memory preparing the outputs");
    int rc = 0;
    drv_out_init(outs, n);
    for (int i = 0; i < n && !rc; i++) {
        drv_out *o = &outs[i];
        if (!o->path)
            continue;
        struct stat st;
        o->existed = 0;
        if (stat(o->path, &st) == 0) {
            if (!S_ISREG(st.st_mode)) {
                rc = drv_fail(d, DRV_BADINPUT, "%s %s: is %s; outputs must be regular files", o->what, o->path,
                              uly_file_kind(st.st_mode));
                break;
            }
            o->existed = 1;
            o->dev = (uint64_t)st.st_dev;
            o->ino = (uint64_t)st.st_ino;
            o->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
            o->size = (int64_t)st.st_size;
        } else if (errno != ENOENT) {
            rc = drv_fail(d, code_of_errno(errno), "%s %s: %s", o->what, o->path, strerror(errno));
            break;
        }
        if ((rc = canonical(d, o, canon[i], sizeof canon[i])))
            break;
        for (int j = 0; j < i && !rc; j++) {
            if (!outs[j].path)
                continue;
            if (strcmp(canon[i], canon[j]) == 0 ||
                (o->existed && outs[j].existed && o->dev == outs[j].dev && o->ino == outs[j].ino))
                rc = drv_fail(d, DRV_BADINPUT, "%s and %s name the same file (%s): each output needs its own path",
                              outs[j].what, o->what, o->path);
        }
        for (int k = 0; k < ninputs && !rc && o->existed; k++) {
            struct stat si;
            if (inputs[k] && stat(inputs[k], &si) == 0 && (uint64_t)si.st_dev == o->dev &&
                (uint64_t)si.st_ino == o->ino)
                rc = drv_fail(d, DRV_BADINPUT, "%s %s is also an input (%s): writing it would destroy the input",
                              o->what, o->path, inputs[k]);
        }
    }
    uly_free(canon);
    for (int i = 0; i < n && !rc; i++)
        if (outs[i].path)
            rc = create_tmp(d, &outs[i]);
    if (rc)
        drv_out_discard(outs, n);
    return rc;
}

void drv_out_init(drv_out *outs, int n)
{
    for (int i = 0; i < n; i++) {
        outs[i].fd = -1;
        outs[i].tmp = NULL;
    }
}

void drv_out_discard(drv_out *outs, int n)
{
    for (int i = 0; i < n; i++) {
        if (outs[i].fd >= 0)
            close(outs[i].fd);
        outs[i].fd = -1;
        if (outs[i].tmp)
            unlink(outs[i].tmp);
        uly_free(outs[i].tmp);
        outs[i].tmp = NULL;
    }
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

/* Rename tmp over path unless someone else got there first. */
static int commit(drv *d, drv_out *o)
{
    if (fsync(o->fd) != 0) {
        int e = errno;
        return drv_fail(d, DRV_RUNTIME, "%s %s: cannot write: fsync: %s", o->what, o->path, strerror(e));
    }
    if (close(o->fd) != 0) {
        o->fd = -1;
        return drv_fail(d, DRV_RUNTIME, "%s %s: cannot write: close: %s", o->what, o->path, strerror(errno));
    }
    o->fd = -1;
    if (o->existed) {
        struct stat st;
        int same = stat(o->path, &st) == 0 && (uint64_t)st.st_dev == o->dev && (uint64_t)st.st_ino == o->ino &&
                   (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec == o->mtime_ns &&
                   (int64_t)st.st_size == o->size;
        if (!same) {
            int rc = drv_fail(d, DRV_RUNTIME,
                              "%s %s was replaced or removed by another process during this run; not overwritten "
                              "(this run's result is in %s)", o->what, o->path, o->tmp);
            uly_free(o->tmp);
            o->tmp = NULL; /* keep the file */
            return rc;
        }
        if (rename(o->tmp, o->path) != 0)
            return drv_fail(d, DRV_RUNTIME, "%s %s: cannot rename the finished file into place: %s", o->what,
                            o->path, strerror(errno));
    } else {
        int r = renameat2(AT_FDCWD, o->tmp, AT_FDCWD, o->path, RENAME_NOREPLACE);
        if (r != 0 && (errno == EINVAL || errno == ENOSYS)) {
            /* file system without RENAME_NOREPLACE: link() fails on an existing name too */
            r = link(o->tmp, o->path);
            if (r == 0)
                unlink(o->tmp);
        }
        if (r != 0 && errno == EEXIST) {
            int rc = drv_fail(d, DRV_RUNTIME,
                              "%s %s was created by another process during this run; not overwritten "
                              "(this run's result is in %s)", o->what, o->path, o->tmp);
            uly_free(o->tmp);
            o->tmp = NULL;
            return rc;
        }
        if (r != 0)
            return drv_fail(d, DRV_RUNTIME, "%s %s: cannot rename the finished file into place: %s", o->what,
                            o->path, strerror(errno));
    }
    uly_free(o->tmp);
    o->tmp = NULL;
    int e = sync_dir(o->path);
    if (e)
        return drv_fail(d, DRV_RUNTIME, "%s %s: written, but fsync of its directory failed: %s", o->what, o->path,
                        strerror(e));
    return 0;
}

int drv_out_commit(drv *d, drv_out *o)
{
    if (!o->tmp || o->fd < 0)
        return drv_fail(d, DRV_RUNTIME, "%s %s: not prepared", o->what, o->path);
    return commit(d, o);
}

int drv_out_npy(drv *d, drv_out *o, uly_dtype t, int ndim, const int64_t *shape, const void *data)
{
    if (!o->tmp || o->fd < 0)
        return drv_fail(d, DRV_RUNTIME, "%s %s: not prepared", o->what, o->path);
    /* The writer opens the temporary by name (same inode as o->fd), which
     * fsync through o->fd then makes durable. */
    int st = uly_npy_write(o->tmp, t, ndim, shape, data);
    if (st)
        return drv_fail(d, st == ULY_EIO ? DRV_RUNTIME : exit_status_of(st), "%s %s: cannot write: %s", o->what,
                        o->path, uly_last_error());
    return commit(d, o);
}
