/* jsonx.c: strict JSON decoding helpers over jansson (see jsonx.h). */
#include <config.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/jsonx.h"

json_t *dt_json_parse (const char *buf, size_t len, dt_error_t *err)
{
    json_error_t jerr;
    json_t *v;

    if (!buf) {
        errnoprintf (err, EPROTO, "invalid JSON: empty body");
        return NULL;
    }
    /* JSON_REJECT_DUPLICATES: {"a":1,"a":2} is ambiguous, refuse it.
     * JSON_DECODE_ANY: a bare value is a valid document. */
    v = json_loadb (buf, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
    if (!v) {
        errnoprintf (err, EPROTO, "invalid JSON at line %d column %d: %s", jerr.line,
                     jerr.column, jerr.text);
        return NULL;
    }
    return v;
}

const char *dt_json_path (char *buf, size_t len, const char *path, const char *key)
{
    if (!path || !*path)
        snprintf (buf, len, "%s", key);
    else
        snprintf (buf, len, "%s.%s", path, key);
    return buf;
}

const char *dt_json_path_index (char *buf, size_t len, const char *path, size_t i)
{
    snprintf (buf, len, "%s[%zu]", path ? path : "", i);
    return buf;
}

/* Name of the object itself in messages: "" is the root. */
static const char *self (const char *path)
{
    return (path && *path) ? path : "(root)";
}

int dt_json_check_object (const json_t *v, const char *path, const char *const allowed[],
                          dt_error_t *err)
{
    const char *key;
    json_t *val;
    char p[128];

    if (!json_is_object (v))
        return errnoprintf (err, EPROTO, "%s: expected object", self (path));
    json_object_foreach ((json_t *)v, key, val)
    {
        bool ok = false;
        for (int i = 0; allowed && allowed[i]; i++) {
            if (!strcmp (key, allowed[i])) {
                ok = true;
                break;
            }
        }
        if (!ok)
            return errnoprintf (err, EPROTO, "%s: unknown field",
                                dt_json_path (p, sizeof (p), path, key));
    }
    return 0;
}

/* Common prologue: fetch 'key' of 'obj'.  Returns 1 when present (in *vp),
 * 0 when absent and optional, -1 on error. */
static int member (const json_t *obj, const char *path, const char *key, bool required,
                   json_t **vp, char *p, size_t plen, dt_error_t *err)
{
    dt_json_path (p, plen, path, key);
    if (!json_is_object (obj))
        return errnoprintf (err, EPROTO, "%s: expected object", self (path));
    if (!(*vp = json_object_get (obj, key)) || (json_is_null (*vp) && !required)) {
        /* An explicit null for an optional field means "not given". */
        if (required)
            return errnoprintf (err, EPROTO, "%s: required field missing", p);
        return 0;
    }
    return 1;
}

int dt_json_get_int (const json_t *obj, const char *path, const char *key, bool required,
                     json_int_t min, json_int_t max, json_int_t *out, dt_error_t *err)
{
    json_t *v;
    char p[128];
    int rc = member (obj, path, key, required, &v, p, sizeof (p), err);
    if (rc <= 0)
        return rc;
    if (!json_is_integer (v))
        return errnoprintf (err, EPROTO, "%s: expected integer", p);
    json_int_t i = json_integer_value (v);
    if (i < min || i > max)
        return errnoprintf (err, ERANGE,
                            "%s: %" JSON_INTEGER_FORMAT
                            " out of range [%" JSON_INTEGER_FORMAT
                            ", %" JSON_INTEGER_FORMAT "]",
                            p, i, min, max);
    *out = i;
    return 0;
}

int dt_json_get_real (const json_t *obj, const char *path, const char *key, bool required,
                      double min, double max, double *out, dt_error_t *err)
{
    json_t *v;
    char p[128];
    int rc = member (obj, path, key, required, &v, p, sizeof (p), err);
    if (rc <= 0)
        return rc;
    if (!json_is_number (v))
        return errnoprintf (err, EPROTO, "%s: expected number", p);
    double d = json_number_value (v);
    if (!isfinite (d) || d < min || d > max)
        return errnoprintf (err, ERANGE, "%s: %g out of range [%g, %g]", p, d, min, max);
    *out = d;
    return 0;
}

int dt_json_get_bool (const json_t *obj, const char *path, const char *key, bool required,
                      bool *out, dt_error_t *err)
{
    json_t *v;
    char p[128];
    int rc = member (obj, path, key, required, &v, p, sizeof (p), err);
    if (rc <= 0)
        return rc;
    if (!json_is_boolean (v))
        return errnoprintf (err, EPROTO, "%s: expected boolean", p);
    *out = json_is_true (v);
    return 0;
}

int dt_json_get_str (const json_t *obj, const char *path, const char *key, bool required,
                     size_t max_len, bool allow_empty, const char **out, dt_error_t *err)
{
    json_t *v;
    char p[128];
    int rc = member (obj, path, key, required, &v, p, sizeof (p), err);
    if (rc <= 0)
        return rc;
    if (!json_is_string (v))
        return errnoprintf (err, EPROTO, "%s: expected string", p);
    size_t len = json_string_length (v);
    const char *s = json_string_value (v);
    if (len == 0 && !allow_empty)
        return errnoprintf (err, EPROTO, "%s: must not be empty", p);
    if (max_len > 0 && len > max_len)
        return errnoprintf (err, ERANGE, "%s: longer than %zu characters", p, max_len);
    /* Embedded NULs (\u0000) would make the C string lie about its length. */
    if (strlen (s) != len)
        return errnoprintf (err, EPROTO, "%s: contains a NUL character", p);
    *out = s;
    return 0;
}

int dt_json_get_obj (const json_t *obj, const char *path, const char *key, bool required,
                     json_t **out, dt_error_t *err)
{
    json_t *v;
    char p[128];
    int rc = member (obj, path, key, required, &v, p, sizeof (p), err);
    if (rc <= 0)
        return rc;
    if (!json_is_object (v))
        return errnoprintf (err, EPROTO, "%s: expected object", p);
    *out = v;
    return 0;
}

int dt_json_get_arr (const json_t *obj, const char *path, const char *key, bool required,
                     json_t **out, dt_error_t *err)
{
    json_t *v;
    char p[128];
    int rc = member (obj, path, key, required, &v, p, sizeof (p), err);
    if (rc <= 0)
        return rc;
    if (!json_is_array (v))
        return errnoprintf (err, EPROTO, "%s: expected array", p);
    *out = v;
    return 0;
}

char *dt_json_dumps (const json_t *v)
{
    char *s = json_dumps (v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!s)
        errno = ENOMEM;
    return s;
}
