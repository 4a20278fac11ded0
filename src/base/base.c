/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base.c -- see base.h.  No dependency beyond POSIX and the C library.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <string.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"

/* ------------------------------------------------------------ last error */

static _Thread_local char last_error[1024];

int uly_base_vset_error(int status, const char *fmt, va_list ap)
{
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    return status;
}

int uly_base_set_error(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    uly_base_vset_error(status, fmt, ap);
    va_end(ap);
    return status;
}

const char *uly_base_last_error(void)
{
    return last_error;
}

void uly_base_clear_error(void)
{
    last_error[0] = '\0';
}

/* ------------------------------------------------------- allocation hooks */

static long alloc_count, fail_at;
static uint64_t alloc_bytes;

/* n * size, saturating (what a calloc of n elements asks for). */
static uint64_t req_bytes(size_t n, size_t size)
{
    return size != 0 && n > UINT64_MAX / size ? UINT64_MAX : (uint64_t)n * (uint64_t)size;
}

static void count_bytes(uint64_t b)
{
    alloc_bytes = alloc_bytes > UINT64_MAX - b ? UINT64_MAX : alloc_bytes + b;
}

uint64_t uly_base_alloc_bytes(void)
{
    uint64_t b = alloc_bytes;
    alloc_bytes = 0;
    return b;
}

long uly_base_fail_alloc_at(long k)
{
    long c = alloc_count;
    fail_at = k;
    alloc_count = 0;
    return c;
}

long uly_base_alloc_count(void)
{
    return alloc_count;
}

static int should_fail(void)
{
    long k = ++alloc_count;
    return fail_at > 0 && k == fail_at;
}

/* Live and peak bytes of the blocks that are allocated through the hooks
 * and not yet freed, as the allocator sizes them (malloc_usable_size: the
 * bytes asked for plus its rounding).  Atomic: the hooks may be called from
 * several threads at once.  Without glibc nothing is measured. */
static _Atomic uint64_t heap_live, heap_peak;

static uint64_t block_bytes(void *p)
{
#if defined(__GLIBC__)
    return p ? (uint64_t)malloc_usable_size(p) : 0;
#else
    (void)p;
    return 0;
#endif
}

static void heap_add(void *p)
{
    const uint64_t b = block_bytes(p);
    if (!b)
        return;
    const uint64_t now = atomic_fetch_add(&heap_live, b) + b;
    uint64_t peak = atomic_load(&heap_peak);
    while (now > peak && !atomic_compare_exchange_weak(&heap_peak, &peak, now))
        ;
}

static void heap_sub(uint64_t b)
{
    /* a block the hooks did not count (none should reach uly_base_free) may
     * not take the count below zero */
    uint64_t live = atomic_load(&heap_live);
    while (!atomic_compare_exchange_weak(&heap_live, &live, live > b ? live - b : 0))
        ;
}

int uly_base_heap_usage(uint64_t *live, uint64_t *peak)
{
    if (live)
        *live = atomic_load(&heap_live);
    if (peak)
        *peak = atomic_load(&heap_peak);
#if defined(__GLIBC__)
    return 1;
#else
    return 0;
#endif
}

void uly_base_heap_reset_peak(void)
{
    atomic_store(&heap_peak, atomic_load(&heap_live));
}

void *uly_base_malloc(size_t n)
{
    if (should_fail())
        return NULL;
    count_bytes(n);
    void *p = malloc(n ? n : 1);
    heap_add(p);
    return p;
}

void *uly_base_calloc(size_t n, size_t size)
{
    if (should_fail())
        return NULL;
    count_bytes(req_bytes(n, size));
    void *p = n == 0 || size == 0 ? calloc(1, 1) : calloc(n, size);
    heap_add(p);
    return p;
}

void *uly_base_realloc(void *p, size_t n)
{
    if (should_fail())
        return NULL;
    count_bytes(n);
    const uint64_t old = block_bytes(p);
    void *q = realloc(p, n ? n : 1);
    if (q) { /* moved or resized: the old block is gone */
        heap_sub(old);
        heap_add(q);
    }
    return q;
}

void uly_base_free(void *p)
{
    if (p)
        heap_sub(block_bytes(p));
    free(p);
}

/* -------------------------------------------------- checked size arithmetic */

int uly_mul_sizes(size_t *out, int n, const int64_t *v)
{
    size_t p = 1;
    for (int i = 0; i < n; i++) {
        if (v[i] < 0 || (uint64_t)v[i] > SIZE_MAX)
            return 1;
        if (uly_mul_size(p, (size_t)v[i], &p))
            return 1;
    }
    *out = p;
    return 0;
}

/* --------------------------------------------------------------- integers */

int uly_parse_int(const char *s, int64_t *out)
{
    if (!s)
        return 1;
    int neg = *s == '-';
    const char *p = s + neg;
    if (*p < '0' || *p > '9')
        return 1;
    uint64_t v = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return 1;
        v = v * 10 + d;
    }
    uint64_t mul = 1;
    switch (*p) {
    case '\0': break;
    case 'k': case 'K': mul = (uint64_t)1 << 10; p++; break;
    case 'm': case 'M': mul = (uint64_t)1 << 20; p++; break;
    case 'g': case 'G': mul = (uint64_t)1 << 30; p++; break;
    default: return 1;
    }
    if (*p)
        return 1;
    /* |value| must fit: INT64_MAX for positives, INT64_MAX + 1 for negatives */
    const uint64_t lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    if (v > lim / mul)
        return 1;
    v *= mul;
    if (neg)
        *out = v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
    else
        *out = (int64_t)v;
    return 0;
}

/* ------------------------------------------------------------------ files */

const char *uly_file_kind(mode_t m)
{
    if (S_ISREG(m)) return "a regular file";
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO (named pipe)";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "not a regular file";
}

int uly_read_file(const char *path, size_t max, char **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return uly_base_set_error(errno == ENOENT ? ULY_READ_NOTFOUND : ULY_READ_IO, "%s: %s", path,
                                  strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return uly_base_set_error(ULY_READ_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return uly_base_set_error(ULY_READ_NOTREG, "%s: is %s, not a regular file", path, uly_file_kind(st.st_mode));
    }
    if ((uintmax_t)st.st_size > max) {
        close(fd);
        return uly_base_set_error(ULY_READ_TOOBIG, "%s: %jd bytes, larger than the %zu bytes accepted", path,
                                  (intmax_t)st.st_size, max);
    }
    size_t n = (size_t)st.st_size, got = 0;
    char *b = uly_base_malloc(n + 1);
    if (!b) {
        close(fd);
        return uly_base_set_error(ULY_READ_NOMEM, "%s: out of memory (%zu bytes)", path, n + 1);
    }
    while (got < n) {
        ssize_t k = read(fd, b + got, n - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            int e = k < 0 ? errno : 0;
            close(fd);
            uly_base_free(b);
            return e ? uly_base_set_error(ULY_READ_IO, "%s: read error: %s", path, strerror(e))
                     : uly_base_set_error(ULY_READ_IO, "%s: the file shrank while it was read", path);
        }
        got += (size_t)k;
    }
    char extra;
    ssize_t more = read(fd, &extra, 1);
    close(fd);
    if (more > 0) {
        uly_base_free(b);
        return uly_base_set_error(ULY_READ_IO, "%s: the file grew while it was read", path);
    }
    b[n] = '\0';
    *buf = b;
    *len = n;
    return ULY_READ_OK;
}

int uly_fput_quoted(FILE *f, const char *s, char quote, int drop_control)
{
    int rc = fputc(quote, f);
    for (; *s && rc != EOF; s++) {
        if (*s == quote)
            rc = fputc(quote, f);
        if (rc != EOF && (!drop_control || (unsigned char)*s >= 0x20))
            rc = fputc(*s, f);
    }
    if (rc != EOF)
        rc = fputc(quote, f);
    return rc == EOF ? EOF : 0;
}

/* ------------------------------------------------------- text from files */

/* Length of the valid UTF-8 sequence at s and its code point, or 0 when the
 * byte at s does not start one (overlong forms, surrogates and values above
 * U+10FFFF are invalid). */
static int utf8_char(const unsigned char *s, uint32_t *cp)
{
    unsigned c = s[0];
    int len;
    uint32_t v, min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c >= 0xc2 && c <= 0xdf) { len = 2; v = c & 0x1f; min = 0x80; }
    else if (c >= 0xe0 && c <= 0xef) { len = 3; v = c & 0x0f; min = 0x800; }
    else if (c >= 0xf0 && c <= 0xf4) { len = 4; v = c & 0x07; min = 0x10000; }
    else return 0;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        v = (v << 6) | (s[i] & 0x3f);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return 0;
    *cp = v;
    return len;
}

static int needs_escape(uint32_t cp)
{
    return cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f) || cp == 0x061c || cp == 0x200e ||
           cp == 0x200f || cp == 0x2028 || cp == 0x2029 || (cp >= 0x202a && cp <= 0x202e) ||
           (cp >= 0x2066 && cp <= 0x2069);
}

/* The next piece of the sanitised form of s: into out (at most 8 bytes, not
 * terminated), its length in *olen; returns the bytes of s consumed. */
static size_t sanitize_step(const char *s, char out[8], size_t *olen)
{
    const unsigned char *u = (const unsigned char *)s;
    uint32_t cp;
    int len = utf8_char(u, &cp);
    if (len == 0) {
        *olen = (size_t)snprintf(out, 8, "\\x%02x", u[0]);
        return 1;
    }
    if (!needs_escape(cp)) {
        memcpy(out, s, (size_t)len);
        *olen = (size_t)len;
        return (size_t)len;
    }
    if (cp == '\n' || cp == '\r' || cp == '\t') {
        out[0] = '\\';
        out[1] = cp == '\n' ? 'n' : cp == '\r' ? 'r' : 't';
        *olen = 2;
    } else if (cp < 0x80) {
        *olen = (size_t)snprintf(out, 8, "\\x%02x", (unsigned)cp);
    } else {
        *olen = (size_t)snprintf(out, 8, "\\u%04X", (unsigned)cp);
    }
    return (size_t)len;
}

size_t uly_sanitize(char *dst, size_t n, const char *s)
{
    size_t need = 0, at = 0;
    int full = 0;
    while (*s) {
        char piece[8];
        size_t pl;
        s += sanitize_step(s, piece, &pl);
        if (!full && n > 0 && at + pl < n) {
            memcpy(dst + at, piece, pl);
            at += pl;
        } else {
            full = 1;
        }
        need += pl;
    }
    if (n > 0)
        dst[at] = '\0';
    return need;
}

int uly_fput_sanitized(FILE *f, const char *s)
{
    while (*s) {
        char piece[8];
        size_t pl;
        s += sanitize_step(s, piece, &pl);
        if (fwrite(piece, 1, pl, f) != pl)
            return EOF;
    }
    return 0;
}

/* ------------------------------------------------------ this process's memory */

const char *uly_fmt_bytes(char *buf, size_t len, uint64_t b)
{
    if (b >= (uint64_t)1 << 30)
        snprintf(buf, len, "%.2f GiB", (double)b / (double)(1 << 30));
    else if (b >= (uint64_t)1 << 20)
        snprintf(buf, len, "%.1f MiB", (double)b / (double)(1 << 20));
    else
        snprintf(buf, len, "%" PRIu64 " bytes", b);
    return buf;
}

uint64_t uly_proc_kb(const char *file, const char *key)
{
    FILE *f = fopen(file, "r");
    if (!f)
        return 0;
    char line[256];
    size_t kl = strlen(key);
    uint64_t v = 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, kl) == 0 && line[kl] == ':') {
            unsigned long long x = 0;
            if (sscanf(line + kl + 1, "%llu", &x) == 1)
                v = (uint64_t)x * 1024;
            break;
        }
    fclose(f);
    return v;
}

uint64_t uly_rlimit_left(int which, uint64_t used)
{
    struct rlimit rl;
    if (getrlimit(which, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return UINT64_MAX;
    return (uint64_t)rl.rlim_cur > used ? (uint64_t)rl.rlim_cur - used : 0;
}
