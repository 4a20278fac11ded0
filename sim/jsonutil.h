/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jsonutil.h -- reading JSON description files with errors that name the
 * file, line, column and the offending key (private to libusim).
 */
#ifndef USIM_JSONUTIL_H
#define USIM_JSONUTIL_H

#include <jansson.h>

typedef struct usim_jdoc {
    const char *file;
    char *text;
    size_t len;
    json_t *root;
} usim_jdoc;

int usim_json_load(usim_jdoc *d, const char *path);
void usim_json_free(usim_jdoc *d);

/* Member `key` of object `obj` (named `parent`, "" for the top level).
 * Numbers: must be > lo (lo_strict) or >= lo; integers must be integral. */
int usim_json_obj(usim_jdoc *d, json_t *obj, const char *parent, const char *key, json_t **out);
/* Largest value usim_json_num accepts (see jsonutil.c). */
#define USIM_JSON_NUM_MAX 1e9

int usim_json_num(usim_jdoc *d, json_t *obj, const char *parent, const char *key, int required,
             double lo, int lo_strict, double *out);
int usim_json_int(usim_jdoc *d, json_t *obj, const char *parent, const char *key, int required,
             int64_t lo, int64_t *out);
int usim_json_bool(usim_jdoc *d, json_t *obj, const char *parent, const char *key, int required, int *out);
int usim_json_str(usim_jdoc *d, json_t *obj, const char *parent, const char *key, int required,
             const char **out);
/* Every key of obj (named parent) must be one of allowed (NULL-terminated):
 * otherwise an error at the unknown key naming the nearest valid key. */
int usim_json_known_keys(usim_jdoc *d, json_t *obj, const char *parent, const char *const *allowed);
/* The member of allowed (NULL-terminated) closest to key in edit distance. */
const char *usim_json_nearest(const char *key, const char *const *allowed);
/* Error at the position of key (or of parent when key is NULL). */
int usim_json_err(usim_jdoc *d, const char *parent, const char *key, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

#endif
