/* conf.h: reader for Slurm-style "Key=Value" configuration files.
 *
 * One setting per line; '#' starts a comment; whitespace around keys and
 * values is ignored; keys are matched case-insensitively (Slurm's habit) and
 * must appear in the caller's list of known keys.  An unknown key, a
 * duplicate key, or a line without '=' is an error naming file:line.
 */
#ifndef DT_CONF_H
#define DT_CONF_H

#include <stdbool.h>
#include <stdint.h>
#include "common/errprintf.h"

typedef struct dt_conf dt_conf_t;

/* Parse 'path'.  'known' is a NULL-terminated list of key names in their
 * canonical spelling.  Returns a new conf (caller destroys) or NULL with
 * errno and err set. */
dt_conf_t *dt_conf_load (const char *path, const char *const known[], dt_error_t *err);

/* Same, parsing 'text' (used by tests); 'name' is shown in errors. */
dt_conf_t *dt_conf_parse (const char *name, const char *text, const char *const known[],
                          dt_error_t *err);

void dt_conf_destroy (dt_conf_t *conf);

/* Set or override a key (command-line flags).  Unknown key: -1, EINVAL. */
int dt_conf_set (dt_conf_t *conf, const char *key, const char *value, dt_error_t *err);

/* Value of 'key' (borrowed), or 'dflt' when the file did not set it. */
const char *dt_conf_get (const dt_conf_t *conf, const char *key, const char *dflt);

/* Typed getters: the default when unset; -1 with err "file:line: Key: ..."
 * when set but not valid (not a number, out of [min,max], overflow). */
int dt_conf_get_int (const dt_conf_t *conf, const char *key, int64_t dflt, int64_t min,
                     int64_t max, int64_t *out, dt_error_t *err);
int dt_conf_get_bool (const dt_conf_t *conf, const char *key, bool dflt, bool *out,
                      dt_error_t *err);
/* A duration in Slurm's forms (see dtime.h), in milliseconds. */
int dt_conf_get_duration_ms (const dt_conf_t *conf, const char *key, int64_t dflt_ms,
                             int64_t *out_ms, dt_error_t *err);

#endif
