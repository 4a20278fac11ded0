/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base_json.c -- see base_json.h.
 */
#include <math.h>
#include <stdlib.h>

#include "base_json.h"

int uly_json_set_real(json_t *o, const char *key, double v)
{
    if (isfinite(v))
        return json_object_set_new(o, key, json_real(v));
    char k2[128];
    snprintf(k2, sizeof k2, "%s_nonfinite", key);
    if (json_object_set_new(o, key, json_null()))
        return -1;
    return json_object_set_new(o, k2, json_string(isnan(v) ? "nan" : v > 0 ? "inf" : "-inf"));
}

int uly_json_set_int(json_t *o, const char *key, int64_t v)
{
    return json_object_set_new(o, key, json_integer((json_int_t)v));
}

int uly_json_set_str(json_t *o, const char *key, const char *s)
{
    return json_object_set_new(o, key, s ? json_string(s) : json_null());
}

int uly_json_set_bool(json_t *o, const char *key, int b)
{
    return json_object_set_new(o, key, json_boolean(b));
}

int uly_json_set_fixed(json_t *o, const char *key, double v, int decimals)
{
    if (!isfinite(v))
        return uly_json_set_real(o, key, v);
    if (decimals <= 0 && fabs(v) < 9007199254740992.0)
        return json_object_set_new(o, key, json_integer((json_int_t)llround(v)));
    double s = pow(10.0, decimals), r = round(v * s) / s;
    return json_object_set_new(o, key, json_real(isfinite(r) ? r : v));
}

json_t *uly_json_add_array(json_t *o, const char *key)
{
    json_t *x = json_array();
    if (!x || json_object_set_new(o, key, x))
        return NULL;
    return x;
}

json_t *uly_json_append_object(json_t *a)
{
    json_t *x = json_object();
    if (!x || json_array_append_new(a, x))
        return NULL;
    return x;
}

int uly_json_append_str(json_t *a, const char *s)
{
    return json_array_append_new(a, s ? json_string(s) : json_null());
}

json_t *uly_json_add_object(json_t *o, const char *key)
{
    json_t *x = json_object();
    if (!x || json_object_set_new(o, key, x))
        return NULL;
    return x;
}

int uly_json_dump(FILE *f, json_t *o, size_t flags)
{
    if (!o)
        return -1;
    char *text = json_dumps(o, flags);
    json_decref(o);
    if (!text)
        return -1;
    int rc = fprintf(f, "%s\n", text) < 0 ? -1 : 0;
    json_free_t release = NULL;
    json_get_alloc_funcs(NULL, &release);
    if (release)
        release(text);
    else
        free(text);
    return rc;
}

int uly_json_emit(FILE *f, json_t *o, int bad, size_t flags)
{
    if (bad) {
        json_decref(o);
        return -1;
    }
    return uly_json_dump(f, o, flags);
}

int uly_json_print(FILE *f, json_t *o)
{
    return uly_json_dump(f, o, JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
}

void uly_json_use_hooks(void)
{
    json_set_alloc_funcs(uly_base_malloc, uly_base_free);
}
