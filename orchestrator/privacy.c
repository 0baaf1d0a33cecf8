/* privacy.c: PrivateData, what other users see of a job (see privacy.h). */
#include <config.h>
#include <string.h>

#include "orchestrator/privacy.h"

bool privacy_sees_all (const struct ctld_config *cfg, uid_t viewer, uid_t owner)
{
    return viewer == owner || config_is_admin (cfg, viewer);
}

bool privacy_sees_job (const struct ctld_config *cfg, uid_t viewer, uid_t owner)
{
    return !(cfg->private_data & PRIVATE_JOBS) || privacy_sees_all (cfg, viewer, owner);
}

static void redact (json_t *v, int what, int depth)
{
    const char *k;
    json_t *x;
    size_t i;

    if (depth > 32)
        return;
    if (json_is_array (v)) {
        json_array_foreach (v, i, x) redact (x, what, depth + 1);
        return;
    }
    if (!json_is_object (v))
        return;
    json_object_foreach (v, k, x)
    {
        if ((what & PRIVATE_ENV) && !strcmp (k, "env") && json_is_object (x)) {
            const char *ek;
            json_t *ev;
            json_object_foreach (x, ek, ev)
              json_object_set_new (x, ek, json_string (PRIVACY_HIDDEN));
        }
        else if ((what & PRIVATE_STDERR) && !strcmp (k, "stderr_tail") &&
                 json_is_string (x))
            json_object_set_new (v, k, json_string (PRIVACY_HIDDEN));
        else
            redact (x, what, depth + 1);
    }
}

void privacy_redact (const struct ctld_config *cfg, json_t *v, uid_t viewer, uid_t owner)
{
    if (!privacy_sees_all (cfg, viewer, owner) && cfg->private_data)
        redact (v, cfg->private_data, 0);
}

/* One node or history row: hide what came from a job 'viewer' may not
 * see. */
static void redact_node (const struct ctld_config *cfg, json_t *n, uid_t viewer,
                         uid_t (*owner_of) (int64_t, void *), void *arg)
{
    json_t *job = json_object_get (n, "job");
    if (!json_is_integer (job) ||
        privacy_sees_job (cfg, viewer, owner_of (json_integer_value (job), arg)))
        return;
    /* (numbers and objects become null, texts say they are hidden) */
    static const char *const gone[] = { "job", "attempt", "hostinfo" };
    static const char *const said[] = { "detail", "note" };
    for (size_t i = 0; i < sizeof (gone) / sizeof (gone[0]); i++)
        if (json_object_get (n, gone[i]))
            json_object_set_new (n, gone[i], json_null ());
    for (size_t i = 0; i < sizeof (said) / sizeof (said[0]); i++)
        if (json_is_string (json_object_get (n, said[i])))
            json_object_set_new (n, said[i], json_string (PRIVACY_HIDDEN));
}

void privacy_redact_nodes (const struct ctld_config *cfg, json_t *v, uid_t viewer,
                           uid_t (*owner_of) (int64_t job, void *arg), void *arg)
{
    size_t i;
    json_t *x;

    if (!(cfg->private_data & PRIVATE_JOBS) || config_is_admin (cfg, viewer))
        return;
    if (json_is_array (v)) {
        json_array_foreach (v, i, x) privacy_redact_nodes (cfg, x, viewer, owner_of, arg);
        return;
    }
    if (!json_is_object (v))
        return;
    redact_node (cfg, v, viewer, owner_of, arg);
    json_array_foreach (json_object_get (v, "history"), i, x)
      redact_node (cfg, x, viewer, owner_of, arg);
}

uid_t privacy_owner (const json_t *view)
{
    json_t *u = json_object_get (view, "uid");
    return json_is_integer (u) ? (uid_t)json_integer_value (u) : (uid_t)-1;
}
