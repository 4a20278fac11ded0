/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base.h -- the small internal library under both programs (libulysses and
 * the `ulysses` driver, libusim and `ulysses-sim`, the fuzz harnesses), so
 * that a fix lands once:
 *
 *   exit statuses            ULY_EXIT_*
 *   the last-error message   one per thread, shared by uly_ and usim_ calls
 *   allocation hooks         with fault injection (the k-th allocation fails)
 *                            and live / peak heap bytes
 *   checked size arithmetic  uly_mul_size, uly_mul_sizes, uly_add_size
 *   integers with K/M/G      uly_parse_int: one syntax and one semantics
 *   files                    uly_file_kind, uly_read_file (whole small files),
 *                            uly_fput_quoted (CSV and gnuplot strings)
 *   text from files          uly_sanitize, uly_fput_sanitized: names and keys
 *                            read from files, made safe to print
 *   this process's memory    uly_fmt_bytes, uly_proc_kb, uly_rlimit_left
 *
 * JSON output through jansson is in base_json.h (it needs jansson; this
 * does not); output files (no output is an input, all committed together)
 * are in base_out.h.  Not installed; nothing here is public API.  Functions are
 * uly_-prefixed and hidden from the shared library.
 */
#ifndef ULY_BASE_H
#define ULY_BASE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#if defined(__GNUC__)
#define ULY_BASE_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define ULY_BASE_API __attribute__((visibility("hidden")))
#else
#define ULY_BASE_PRINTF(a, b)
#define ULY_BASE_API
#endif

/* ------------------------------------------------------------ exit statuses */

/* Every program: 0 success, 1 failure at run time (I/O, memory, MPI,
 * non-finite results, a failed check), 2 bad input or configuration. */
enum { ULY_EXIT_OK = 0, ULY_EXIT_RUNTIME = 1, ULY_EXIT_BADINPUT = 2 };

/* ------------------------------------------------------------ last error */

/* Record the message of a failure for this thread and return status. */
ULY_BASE_API int uly_base_set_error(int status, const char *fmt, ...) ULY_BASE_PRINTF(2, 3);
ULY_BASE_API int uly_base_vset_error(int status, const char *fmt, va_list ap) ULY_BASE_PRINTF(2, 0);
/* The message of the last failure of this thread ("" when none). */
ULY_BASE_API const char *uly_base_last_error(void);
ULY_BASE_API void uly_base_clear_error(void);

/* ------------------------------------------------------- allocation hooks */

/* malloc / calloc / realloc that a test can make fail: after
 * uly_base_fail_alloc_at(k), the k-th call from then on (counting from 1)
 * returns NULL; 0 disables.  Not thread-safe by design (tests use one
 * thread).  Zero sizes allocate one byte, so NULL always means failure. */
ULY_BASE_API void *uly_base_malloc(size_t n);
ULY_BASE_API void *uly_base_calloc(size_t n, size_t size);
ULY_BASE_API void *uly_base_realloc(void *p, size_t n);
ULY_BASE_API void uly_base_free(void *p);
/* Returns the number of allocations counted since the previous call. */
ULY_BASE_API long uly_base_fail_alloc_at(long k);
ULY_BASE_API long uly_base_alloc_count(void);
/* Bytes asked for through the three hooks since the previous call (reading
 * resets it; saturates at UINT64_MAX): malloc's n, calloc's n * size,
 * realloc's new size.  A zero-byte request counts 0 (one byte is allocated
 * so that NULL means failure); a failed (injected) allocation counts
 * nothing.  What uly_dist_memory / uly_sp_memory list as ULY_BUF_HEAP. */
ULY_BASE_API uint64_t uly_base_alloc_bytes(void);
/* Bytes of the blocks allocated through the hooks and not yet freed
 * through uly_base_free (*live), and the most there were at once since the
 * start or the last uly_base_heap_reset_peak (*peak).  Each block counts
 * as the allocator sizes it (glibc's malloc_usable_size): at least the
 * bytes asked for; glibc adds less than 24 bytes to a block from its heap
 * and less than a page (4 KiB) to one it maps (128 KiB and more by
 * default).  Thread-safe (atomic), unlike the counters above.  Returns 1,
 * or 0 where nothing is measured (no glibc: both stay 0). */
ULY_BASE_API int uly_base_heap_usage(uint64_t *live, uint64_t *peak);
/* Start a new peak from the live bytes. */
ULY_BASE_API void uly_base_heap_reset_peak(void);

/* -------------------------------------------------- checked size arithmetic */

/* *out = a * b; returns 1 (and leaves *out) on overflow. */
static inline int uly_mul_size(size_t a, size_t b, size_t *out)
{
    if (a != 0 && b > SIZE_MAX / a)
        return 1;
    *out = a * b;
    return 0;
}

/* *out = a + b; returns 1 on overflow. */
static inline int uly_add_size(size_t a, size_t b, size_t *out)
{
    if (b > SIZE_MAX - a)
        return 1;
    *out = a + b;
    return 0;
}

/* *out = product of n non-negative int64 values (as size_t); 1 on overflow or negative. */
ULY_BASE_API int uly_mul_sizes(size_t *out, int n, const int64_t *v);

/* --------------------------------------------------------------- integers */

/*
 * A decimal integer with an optional K, M or G suffix (powers of 1024,
 * either case): "4096", "64K", "-3".  One optional leading '-'; no '+', no
 * spaces, no other suffix.  Returns 0 and sets *out, or 1 when the text is
 * not such an integer or the value does not fit in int64.  Whether a
 * negative value (or zero) is acceptable is the caller's range check:
 * counts say "must be >= 1", never "not a number".
 */
ULY_BASE_API int uly_parse_int(const char *s, int64_t *out);

/* ------------------------------------------------------------------ files */

/* "a directory", "a FIFO (named pipe)", "a character device", "a block
 * device", "a socket", "a regular file" or "not a regular file". */
ULY_BASE_API const char *uly_file_kind(mode_t mode);

/* ------------------------------------------------------ this process's memory */

/* Bytes for people into buf: "1.50 GiB", "3.0 MiB" or "512 bytes". */
ULY_BASE_API const char *uly_fmt_bytes(char *buf, size_t len, uint64_t b);
/* The value of `key` in a /proc file of "Key:   N kB" lines (/proc/self/status,
 * /proc/meminfo), in bytes; 0 when the file or the key is missing. */
ULY_BASE_API uint64_t uly_proc_kb(const char *file, const char *key);
/* What rlimit `which` (RLIMIT_AS, RLIMIT_DATA) leaves once `used` bytes are
 * taken: UINT64_MAX when there is no limit, 0 when used exceeds it. */
ULY_BASE_API uint64_t uly_rlimit_left(int which, uint64_t used);

/* Why uly_read_file failed (the message is in uly_base_last_error()). */
enum { ULY_READ_OK = 0, ULY_READ_NOTFOUND, ULY_READ_NOTREG, ULY_READ_TOOBIG, ULY_READ_IO, ULY_READ_NOMEM };

/*
 * The whole content of a regular file of at most max bytes, NUL-terminated,
 * in *buf (uly_base_malloc'ed; *len excludes the NUL).  The file's type and
 * size are checked on the open descriptor before anything is read or
 * allocated; a directory, FIFO or device is refused by name (and opening a
 * FIFO does not wait for a writer).  Messages start with the path.
 */
ULY_BASE_API int uly_read_file(const char *path, size_t max, char **buf, size_t *len);

/* s between two `quote` characters with each quote inside doubled (CSV's
 * "a""b", gnuplot's 'a''b'); with drop_control, bytes below 0x20 are left
 * out (a gnuplot command ends at a newline).  Returns 0 or EOF. */
ULY_BASE_API int uly_fput_quoted(FILE *f, const char *s, char quote, int drop_control);

/*
 * Text that came from a file (a platform's name, a JSON key, a dtype string)
 * made safe to print on a terminal: every character that could move the
 * cursor, recolour, rewrite or reorder the line is written as a visible
 * escape instead -- C0 controls and DEL (\n, \r, \t, else \xHH: ESC is
 * \x1b), C1 controls (U+0080..U+009F), the line and paragraph separators
 * U+2028/U+2029 and the bidirectional formatting characters (U+061C,
 * U+200E, U+200F, U+202A..U+202E, U+2066..U+2069) as \uXXXX, and a byte
 * that is not part of valid UTF-8 as \xHH.  Everything else is unchanged.
 *
 * uly_sanitize writes at most n bytes to dst (NUL-terminated when n > 0,
 * never cutting a character or an escape) and returns the length the whole
 * result needs, as snprintf does.  uly_fput_sanitized writes to f and
 * returns 0 or EOF.
 */
ULY_BASE_API size_t uly_sanitize(char *dst, size_t n, const char *s);
ULY_BASE_API int uly_fput_sanitized(FILE *f, const char *s);

#endif
