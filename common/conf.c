/* conf.c: Slurm-style "Key=Value" configuration files (see conf.h). */
#include <config.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/conf.h"
#include "common/dtime.h"

/* A config file is a few dozen lines; anything this large is a mistake
 * (wrong file given) and is refused rather than read into memory. */
#define CONF_MAX_BYTES (1024 * 1024)

struct conf_entry {
    char *key;   /* canonical spelling, from 'known' */
    char *value; /* NULL when unset */
    int line;    /* 0 when set with dt_conf_set */
};

struct dt_conf {
    char *name;
    struct conf_entry *entries;
    int n;
};

void dt_conf_destroy (dt_conf_t *conf)
{
    if (conf) {
        int saved = errno;
        for (int i = 0; i < conf->n; i++) {
            free (conf->entries[i].key);
            free (conf->entries[i].value);
        }
        free (conf->entries);
        free (conf->name);
        free (conf);
        errno = saved;
    }
}

static struct conf_entry *conf_find (const dt_conf_t *conf, const char *key)
{
    for (int i = 0; i < conf->n; i++)
        if (!strcasecmp (conf->entries[i].key, key))
            return &conf->entries[i];
    return NULL;
}

static dt_conf_t *conf_new (const char *name, const char *const known[])
{
    dt_conf_t *conf;
    int n = 0;

    while (known && known[n])
        n++;
    if (!(conf = calloc (1, sizeof (*conf))) ||
        !(conf->name = strdup (name ? name : "(config)")) ||
        !(conf->entries = calloc (n ? n : 1, sizeof (conf->entries[0]))))
        goto nomem;
    for (int i = 0; i < n; i++) {
        if (!(conf->entries[i].key = strdup (known[i])))
            goto nomem;
        conf->n++;
    }
    return conf;
nomem:
    dt_conf_destroy (conf);
    errno = ENOMEM;
    return NULL;
}

static char *trim (char *s)
{
    char *e;
    while (isspace ((unsigned char)*s))
        s++;
    e = s + strlen (s);
    while (e > s && isspace ((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

static bool valid_key (const char *k)
{
    if (!*k)
        return false;
    for (; *k; k++)
        if (!isalnum ((unsigned char)*k) && *k != '_' && *k != '.' && *k != '-')
            return false;
    return true;
}

dt_conf_t *dt_conf_parse (const char *name, const char *text, const char *const known[],
                          dt_error_t *err)
{
    dt_conf_t *conf;
    char *copy = NULL;
    char *line, *next;
    int lineno = 0;

    if (!text) {
        errnoprintf (err, EINVAL, "%s: no text", name ? name : "(config)");
        return NULL;
    }
    if (!(conf = conf_new (name, known)) || !(copy = strdup (text))) {
        errprintf (err, "%s: out of memory", name ? name : "(config)");
        dt_conf_destroy (conf);
        errno = ENOMEM;
        return NULL;
    }
    for (line = copy; line; line = next) {
        char *eq, *key, *value, *hash;
        struct conf_entry *e;

        lineno++;
        if ((next = strchr (line, '\n')))
            *next++ = '\0';
        if ((hash = strchr (line, '#')))
            *hash = '\0';
        line = trim (line);
        if (*line == '\0')
            continue;
        if (!(eq = strchr (line, '='))) {
            errnoprintf (err, EINVAL, "%s:%d: expected Key=Value, got '%.40s'",
                         conf->name, lineno, line);
            goto error;
        }
        *eq = '\0';
        key = trim (line);
        value = trim (eq + 1);
        if (!valid_key (key)) {
            errnoprintf (err, EINVAL, "%s:%d: invalid key '%.40s'", conf->name, lineno,
                         key);
            goto error;
        }
        /* Slurm allows Key="value with spaces". */
        size_t vl = strlen (value);
        if (vl >= 2 && value[0] == '"' && value[vl - 1] == '"') {
            value[vl - 1] = '\0';
            value++;
        }
        if (!(e = conf_find (conf, key))) {
            errnoprintf (err, EINVAL, "%s:%d: unknown key '%.40s'", conf->name, lineno,
                         key);
            goto error;
        }
        if (e->value) {
            errnoprintf (err, EINVAL, "%s:%d: duplicate key '%s' (first set at line %d)",
                         conf->name, lineno, e->key, e->line);
            goto error;
        }
        if (!(e->value = strdup (value))) {
            errnoprintf (err, ENOMEM, "%s: out of memory", conf->name);
            goto error;
        }
        e->line = lineno;
    }
    free (copy);
    return conf;
error:
    free (copy);
    dt_conf_destroy (conf);
    return NULL;
}

dt_conf_t *dt_conf_load (const char *path, const char *const known[], dt_error_t *err)
{
    FILE *f;
    char *buf = NULL;
    size_t n;
    dt_conf_t *conf;

    if (!(f = fopen (path, "r"))) {
        errprintf (err, "%s: %s", path, strerror (errno));
        return NULL;
    }
    if (!(buf = malloc (CONF_MAX_BYTES + 1))) {
        fclose (f);
        errnoprintf (err, ENOMEM, "%s: out of memory", path);
        return NULL;
    }
    n = fread (buf, 1, CONF_MAX_BYTES + 1, f);
    if (ferror (f)) {
        int e = errno;
        errnoprintf (err, e, "%s: read: %s", path, strerror (e));
        goto error;
    }
    if (n > CONF_MAX_BYTES) {
        errnoprintf (err, EFBIG, "%s: larger than %d bytes", path, CONF_MAX_BYTES);
        goto error;
    }
    if (memchr (buf, '\0', n)) {
        errnoprintf (err, EINVAL, "%s: contains a NUL byte (not a text file?)", path);
        goto error;
    }
    buf[n] = '\0';
    fclose (f);
    conf = dt_conf_parse (path, buf, known, err);
    free (buf);
    return conf;
error:
    fclose (f);
    free (buf);
    return NULL;
}

int dt_conf_set (dt_conf_t *conf, const char *key, const char *value, dt_error_t *err)
{
    struct conf_entry *e;
    char *v;

    if (!conf || !key || !value)
        return errnoprintf (err, EINVAL, "invalid argument");
    if (!(e = conf_find (conf, key)))
        return errnoprintf (err, EINVAL, "unknown key '%.40s'", key);
    if (!(v = strdup (value)))
        return errnoprintf (err, ENOMEM, "out of memory");
    free (e->value);
    e->value = v;
    e->line = 0;
    return 0;
}

const char *dt_conf_get (const dt_conf_t *conf, const char *key, const char *dflt)
{
    struct conf_entry *e;
    if (!conf || !key || !(e = conf_find (conf, key)) || !e->value)
        return dflt;
    return e->value;
}

/* "file:line: Key" or "command line: Key" for error messages. */
static int conf_err (const dt_conf_t *conf, const struct conf_entry *e, dt_error_t *err,
                     int errnum, const char *what)
{
    if (e->line > 0)
        return errnoprintf (err, errnum, "%s:%d: %s: %s", conf->name, e->line, e->key,
                            what);
    return errnoprintf (err, errnum, "%s: %s", e->key, what);
}

int dt_conf_get_int (const dt_conf_t *conf, const char *key, int64_t dflt, int64_t min,
                     int64_t max, int64_t *out, dt_error_t *err)
{
    struct conf_entry *e;
    char *end;
    long long v;
    char what[128];

    if (!conf || !key || !out)
        return errnoprintf (err, EINVAL, "invalid argument");
    if (!(e = conf_find (conf, key)))
        return errnoprintf (err, EINVAL, "unknown key '%.40s'", key);
    if (!e->value) {
        *out = dflt;
        return 0;
    }
    errno = 0;
    v = strtoll (e->value, &end, 10);
    if (end == e->value || *end != '\0' || isspace ((unsigned char)e->value[0])) {
        snprintf (what, sizeof (what), "'%.40s' is not an integer", e->value);
        return conf_err (conf, e, err, EINVAL, what);
    }
    if (errno == ERANGE || v < min || v > max) {
        snprintf (what, sizeof (what), "%.40s is out of range [%" PRId64 ", %" PRId64 "]",
                  e->value, min, max);
        return conf_err (conf, e, err, ERANGE, what);
    }
    *out = v;
    return 0;
}

int dt_conf_get_bool (const dt_conf_t *conf, const char *key, bool dflt, bool *out,
                      dt_error_t *err)
{
    static const char *yes[] = { "yes", "true", "on", "1", NULL };
    static const char *no[] = { "no", "false", "off", "0", NULL };
    struct conf_entry *e;
    char what[128];

    if (!conf || !key || !out)
        return errnoprintf (err, EINVAL, "invalid argument");
    if (!(e = conf_find (conf, key)))
        return errnoprintf (err, EINVAL, "unknown key '%.40s'", key);
    if (!e->value) {
        *out = dflt;
        return 0;
    }
    for (int i = 0; yes[i]; i++) {
        if (!strcasecmp (e->value, yes[i])) {
            *out = true;
            return 0;
        }
        if (!strcasecmp (e->value, no[i])) {
            *out = false;
            return 0;
        }
    }
    snprintf (what, sizeof (what), "'%.40s' is not a boolean (yes/no)", e->value);
    return conf_err (conf, e, err, EINVAL, what);
}

int dt_conf_get_duration_ms (const dt_conf_t *conf, const char *key, int64_t dflt_ms,
                             int64_t *out_ms, dt_error_t *err)
{
    struct conf_entry *e;
    dt_error_t derr;
    int64_t v;

    if (!conf || !key || !out_ms)
        return errnoprintf (err, EINVAL, "invalid argument");
    if (!(e = conf_find (conf, key)))
        return errnoprintf (err, EINVAL, "unknown key '%.40s'", key);
    if (!e->value) {
        *out_ms = dflt_ms;
        return 0;
    }
    if (dt_parse_duration_ms (e->value, &v, &derr) < 0)
        return conf_err (conf, e, err, errno, derr.text);
    *out_ms = v;
    return 0;
}
