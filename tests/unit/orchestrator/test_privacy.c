/* test_privacy.c: PrivateData (orchestrator/privacy.c): what other users
 * see of a job; the owner and admins see all. */
#include <config.h>
#include <string.h>
#include <jansson.h>
#include "orchestrator/privacy.h"
#include "tests/unit/unit.h"

static json_t *job (void)
{
    return json_pack (
      "{s:i s:{s:{s:s s:s} s:[s]} s:{s:{s:s s:i}} s:[{s:{s:s}}]"
      " s:{s:{s:{s:s}}}}",
      "uid", 1001, "spec", "env", "TOKEN", "s3cret", "MODE", "fast", "command", "train",
      "failure", "evidence", "stderr_tail", "Traceback: s3cret", "exit_code", 1, "events",
      "data", "stderr_tail", "oops", "provenance", "job", "env", "TOKEN", "s3cret");
}

static bool leaks (json_t *j, const char *what)
{
    char *s = json_dumps (j, 0);
    bool r = s && strstr (s, what);
    free (s);
    return r;
}

static void test_redact (void)
{
    struct ctld_config cfg;
    json_t *j;

    memset (&cfg, 0, sizeof (cfg));
    cfg.private_data = PRIVATE_ENV | PRIVATE_STDERR;
    cfg.admin_uids[0] = 1500;
    cfg.nadmins = 1;

    /* another user: env values and stderr tails hidden, the rest kept */
    j = job ();
    privacy_redact (&cfg, j, 1002, privacy_owner (j));
    CU_ASSERT (!leaks (j, "s3cret") && !leaks (j, "oops"));
    CU_ASSERT_STRING_EQUAL (
      json_string_value (
        json_object_get (json_object_get (json_object_get (j, "spec"), "env"), "MODE")),
      PRIVACY_HIDDEN);
    CU_ASSERT (leaks (j, "\"train\"") && leaks (j, "\"exit_code\": 1"));
    json_decref (j);
    /* the owner, an admin, root: everything */
    uid_t all[] = { 1001, 1500, 0 };
    for (size_t i = 0; i < 3; i++) {
        j = job ();
        privacy_redact (&cfg, j, all[i], 1001);
        CU_ASSERT (leaks (j, "s3cret") && leaks (j, "oops"));
        json_decref (j);
    }
    /* env only: stderr tails stay */
    cfg.private_data = PRIVATE_ENV;
    j = job ();
    privacy_redact (&cfg, j, 1002, 1001);
    CU_ASSERT (leaks (j, "oops") && !leaks (j, "TOKEN\": \"s3cret"));
    json_decref (j);
    /* none */
    cfg.private_data = 0;
    j = job ();
    privacy_redact (&cfg, j, 1002, 1001);
    CU_ASSERT (leaks (j, "s3cret"));
    json_decref (j);
}

static void test_sees_job (void)
{
    struct ctld_config cfg;

    memset (&cfg, 0, sizeof (cfg));
    cfg.private_data = PRIVATE_ENV;
    CU_ASSERT (privacy_sees_job (&cfg, 1002, 1001));
    cfg.private_data = PRIVATE_JOBS;
    CU_ASSERT (!privacy_sees_job (&cfg, 1002, 1001));
    CU_ASSERT (privacy_sees_job (&cfg, 1001, 1001));
    CU_ASSERT (privacy_sees_job (&cfg, 0, 1001));
    json_t *v = json_pack ("{s:s}", "name", "x");
    CU_ASSERT_EQUAL (privacy_owner (v), (uid_t)-1); /* no uid: nobody's */
    json_decref (v);
}

static const struct dt_unit_test tests[] = {
    { "env values and stderr tails hidden from others", test_redact },
    { "PrivateData=jobs", test_sees_job },
    { NULL, NULL },
};

int main (void)
{
    return dt_unit_run ("privacy", tests);
}
