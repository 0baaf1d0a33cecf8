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

uid_t privacy_owner (const json_t *view)
{
    json_t *u = json_object_get (view, "uid");
    return json_is_integer (u) ? (uid_t)json_integer_value (u) : (uid_t)-1;
}
