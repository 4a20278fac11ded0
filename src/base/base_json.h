/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base_json.h -- JSON output through jansson, shared by the drivers of both
 * programs (part of the base library, see base.h; needs jansson).
 *
 * JSON has no NaN or infinity: a number that is not finite is written as
 * null with a companion key "<key>_nonfinite" holding "nan", "inf" or
 * "-inf", so that a reader can neither mistake it for a value nor lose it.
 */
#ifndef ULY_BASE_JSON_H
#define ULY_BASE_JSON_H

#include <stdint.h>
#include <stdio.h>
#include <jansson.h>

#include "base.h"

/* o[key] = v, or null plus o[key + "_nonfinite"]; 0 or -1 (out of memory). */
ULY_BASE_API int uly_json_set_real(json_t *o, const char *key, double v);
ULY_BASE_API int uly_json_set_int(json_t *o, const char *key, int64_t v);
ULY_BASE_API int uly_json_set_str(json_t *o, const char *key, const char *s);
ULY_BASE_API int uly_json_set_bool(json_t *o, const char *key, int b);
/* o[key] = v rounded to `decimals` places (an integer when decimals is 0
 * and |v| < 2^53), or null plus o[key + "_nonfinite"]; 0 or -1.  With
 * uly_json_dump's precision 15 the text shows at most those decimals. */
ULY_BASE_API int uly_json_set_fixed(json_t *o, const char *key, double v, int decimals);
/* o[key] = a new object / array (returned, owned by o), or NULL. */
ULY_BASE_API json_t *uly_json_add_object(json_t *o, const char *key);
ULY_BASE_API json_t *uly_json_add_array(json_t *o, const char *key);
/* Append a new object (returned, owned by a) or a string to array a. */
ULY_BASE_API json_t *uly_json_append_object(json_t *a);
ULY_BASE_API int uly_json_append_str(json_t *a, const char *s);
/* Print o with jansson's flags (order kept, the given real precision,
 * JSON_INDENT(n) or one line) and a newline; decrefs o.  0 or -1 (o NULL,
 * out of memory, write error). */
ULY_BASE_API int uly_json_dump(FILE *f, json_t *o, size_t flags);
/* The end of building o with a flag `bad` that collects the helpers'
 * failures: when bad, o is freed and -1 returned; otherwise uly_json_dump. */
ULY_BASE_API int uly_json_emit(FILE *f, json_t *o, int bad, size_t flags);
/* uly_json_dump on one line, keys in insertion order, 6 significant digits. */
ULY_BASE_API int uly_json_print(FILE *f, json_t *o);
/* Make jansson allocate through the base allocation hooks. */
ULY_BASE_API void uly_json_use_hooks(void);

#endif
