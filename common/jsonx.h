/* jsonx.h: strict JSON decoding over jansson.
 *
 * Every message and spec is decoded at the edge with these helpers: an
 * unknown key, a wrong type, an out-of-range number or a missing required
 * field is rejected with the path of the field, e.g.
 * "checkpoint.every_steps: expected integer".  Paths are dotted, with
 * [i] for array elements ("command[2]: expected string").
 */
#ifndef DT_JSONX_H
#define DT_JSONX_H

#include <stdbool.h>
#include <stddef.h>
#include <jansson.h>
#include "common/errprintf.h"

/* Parse buf[0..len) as one JSON value (no trailing data).  Malformed or
 * truncated input: NULL, errno EPROTO, err "invalid JSON at line L column C:
 * ...".  Returns a new reference. */
json_t *dt_json_parse (const char *buf, size_t len, dt_error_t *err);

/* Require 'v' to be an object whose keys are all in 'allowed' (NULL-terminated).
 * 'path' is the object's own path ("" for the root).  Error text:
 * "<path>.<key>: unknown field" or "<path>: expected object". */
int dt_json_check_object (const json_t *v, const char *path, const char *const allowed[],
                          dt_error_t *err);

/* Getters of one member of object 'obj' (whose path is 'path').  If the key
 * is absent: required -> "<path>.<key>: required field missing"; otherwise
 * *out is left untouched and 0 is returned.  A present key of the wrong type
 * or out of range is always an error. */
int dt_json_get_int (const json_t *obj, const char *path, const char *key, bool required,
                     json_int_t min, json_int_t max, json_int_t *out, dt_error_t *err);
int dt_json_get_real (const json_t *obj, const char *path, const char *key, bool required,
                      double min, double max, double *out, dt_error_t *err);
int dt_json_get_bool (const json_t *obj, const char *path, const char *key, bool required,
                      bool *out, dt_error_t *err);
/* *out is borrowed from obj.  max_len 0 means no limit; an empty string is
 * accepted only when allow_empty. */
int dt_json_get_str (const json_t *obj, const char *path, const char *key, bool required,
                     size_t max_len, bool allow_empty, const char **out, dt_error_t *err);
/* *out borrowed; requires an object / array. */
int dt_json_get_obj (const json_t *obj, const char *path, const char *key, bool required,
                     json_t **out, dt_error_t *err);
int dt_json_get_arr (const json_t *obj, const char *path, const char *key, bool required,
                     json_t **out, dt_error_t *err);

/* Join "path" and "key" into buf ("a" + "b" -> "a.b"; "" + "b" -> "b"). */
const char *dt_json_path (char *buf, size_t len, const char *path, const char *key);
/* "path[i]" */
const char *dt_json_path_index (char *buf, size_t len, const char *path, size_t i);

/* Serialise compactly; caller frees.  NULL on ENOMEM. */
char *dt_json_dumps (const json_t *v);

#endif
