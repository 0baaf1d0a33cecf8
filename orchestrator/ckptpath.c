/* ckptpath.c: checkpoint paths dtctl assigns and their checks (see ckptpath.h). */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "orchestrator/ckptpath.h"

bool ckptpath_is_normal (const char *p)
{
    if (!p || p[0] != '/')
        return false;
    if (p[1] == '\0')
        return true; /* "/" itself */
    for (const char *c = p + 1;;) {
        size_t n = strcspn (c, "/");
        if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
            return false;
        if (c[n] == '\0')
            return true;
        c += n + 1;
    }
}

int ckptpath_shard (char *buf, size_t len, const char *jobdir, int64_t step, int rank,
                    bool jit, int shard_rank)
{
    int n;
    if (jit)
        n = snprintf (buf, len, "%s/jit-%" PRId64 "-r%d/rank-%d.ckpt", jobdir, step, rank,
                      shard_rank);
    else
        n = snprintf (buf, len, "%s/step-%" PRId64 "/rank-%d.ckpt", jobdir, step, rank);
    if (n < 0 || (size_t)n >= len) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

int ckptpath_check_shard (const char *jobdir, int64_t step, int rank, bool jit,
                          int shard_rank, const char *path, dt_error_t *err)
{
    char want[PATH_MAX];

    if (!ckptpath_is_normal (jobdir))
        return errnoprintf (err, EINVAL,
                            "path: the job's checkpoint directory '%.60s' is not "
                            "a normal absolute path",
                            jobdir);
    if (step < 0 || rank < 0 || (jit && shard_rank < 0))
        return errnoprintf (err, EINVAL, "path: step or rank out of range");
    if (ckptpath_shard (want, sizeof (want), jobdir, step, rank, jit, shard_rank) < 0)
        return errnoprintf (err, ENAMETOOLONG, "path: the checkpoint path is too long");
    if (!path || strcmp (path, want) != 0)
        return errnoprintf (err, EINVAL,
                            "path: '%.48s%s' refused: a %sshard of rank %d, step "
                            "%" PRId64 " must be %.48s%s",
                            path ? path : "(none)",
                            path && strlen (path) > 48 ? "..." : "",
                            jit ? "just-in-time " : "", jit ? shard_rank : rank, step,
                            want, strlen (want) > 48 ? "..." : "");
    return 0;
}

/* Parse a decimal number at *s (no sign, no leading zero unless "0");
 * advances *s.  False if there is none or it does not fit. */
static bool parse_num (const char **s, int64_t *out)
{
    const char *p = *s;
    int64_t v = 0;
    if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] >= '0' && p[1] <= '9'))
        return false;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > (INT64_MAX - (*p - '0')) / 10)
            return false;
        v = v * 10 + (*p - '0');
    }
    *s = p;
    *out = v;
    return true;
}

/* True if 's' is exactly: prefix NUM [mid NUM] (mid may be NULL). */
static bool match (const char *s, const char *prefix, const char *mid)
{
    int64_t v;
    size_t n = strlen (prefix);
    if (strncmp (s, prefix, n))
        return false;
    s += n;
    if (!parse_num (&s, &v))
        return false;
    if (mid) {
        n = strlen (mid);
        if (strncmp (s, mid, n))
            return false;
        s += n;
        if (!parse_num (&s, &v))
            return false;
    }
    return *s == '\0';
}

enum ckptpath_kind ckptpath_classify (const char *name)
{
    if (match (name, "step-", NULL))
        return CKPTPATH_STEP;
    if (match (name, "jit-", "-r"))
        return CKPTPATH_JIT;
    if (match (name, ".partial-step-", "-a"))
        return CKPTPATH_PARTIAL;
    return CKPTPATH_OTHER;
}

bool ckptpath_is_ckpt_file (const char *name)
{
    const char *s = name[0] == '.' ? name + 1 : name;
    size_t n;

    if (!strcmp (name, "manifest.json"))
        return true;
    if (!strncmp (s, "manifest.json.tmp", 17))
        return true;
    /* rank-<R>.ckpt, or a temporary of it */
    if (strncmp (s, "rank-", 5))
        return false;
    n = strspn (s + 5, "0123456789");
    if (n == 0 || n > 10 || strncmp (s + 5 + n, ".ckpt", 5))
        return false;
    s += 5 + n + 5;
    if (*s == '\0')
        return name[0] != '.';
    return !strncmp (s, ".tmp", 4);
}
