/* test_ctldconf.c: dtctld's configuration loader (orchestrator/ctldconf.c):
 * built-in defaults, a file's values, flag overrides over the file, and
 * each refusal naming its key (file:line for the file's own errors). */
#include <config.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "orchestrator/ctldconf.h"
#include "tests/unit/unit.h"

static char path[] = "/tmp/test_ctldconf.XXXXXX";

static int write_conf (const char *text)
{
    FILE *f = fopen (path, "w");
    if (!f)
        return -1;
    fputs (text, f);
    return fclose (f);
}

static void test_defaults (void)
{
    dt_error_t err = { "" };
    struct ctld_config *c = config_load (NULL, NULL, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL (c);
    CU_ASSERT_STRING_EQUAL (c->listen_address, "127.0.0.1");
    CU_ASSERT_EQUAL (c->listen_port, 6830);
    CU_ASSERT_STRING_EQUAL (c->state_dir, "/var/lib/dtctld");
    CU_ASSERT_STRING_EQUAL (c->database_path, "/var/lib/dtctld/dtctld.db");
    CU_ASSERT_STRING_EQUAL (c->pid_file, "/var/lib/dtctld/dtctld.pid");
    CU_ASSERT_STRING_EQUAL (c->launcher, "slurm");
    CU_ASSERT_EQUAL (c->auth, AUTH_MUNGE);
    CU_ASSERT_EQUAL (c->heartbeat_interval_ms, 1000);
    CU_ASSERT_EQUAL (c->node_timeout_ms, 10000);
    CU_ASSERT_EQUAL (c->hang_timeout_ms, 0);
    CU_ASSERT_EQUAL (c->rendezvous_timeout_ms, 120000);
    CU_ASSERT_EQUAL (c->max_body, 1 << 20);
    CU_ASSERT_EQUAL (c->hang_floor_ms, 30000);
    CU_ASSERT_EQUAL (c->suspect_jobs, 3);
    CU_ASSERT_TRUE (config_is_admin (c, 0)); /* root always */
    CU_ASSERT_FALSE (config_is_admin (c, 1234));
    config_destroy (c);
}

static void test_file_and_overrides (void)
{
    dt_error_t err = { "" };
    struct config_overrides ov = { 0 };
    CU_ASSERT_EQUAL_FATAL (write_conf ("# a comment\n"
                                       "ListenPort=7001\n"
                                       "StateDir=/srv/dt\n"
                                       "Launcher=local\n"
                                       "HeartbeatInterval=250ms\n"
                                       "NodeTimeout=2s\n"
                                       "HangTimeout=1m\n"
                                       "AdminUsers=1234,root\n"
                                       "LogLevel=debug\n"),
                           0);
    CU_ASSERT_EQUAL (config_override (&ov, "ListenPort", "7002"), 0);
    CU_ASSERT_EQUAL (config_override (&ov, "DatabasePath", "/db/x.db"), 0);
    struct ctld_config *c = config_load (path, &ov, &err);
    if (!c)
        fprintf (stderr, "%s\n", err.text);
    CU_ASSERT_PTR_NOT_NULL_FATAL (c);
    CU_ASSERT_EQUAL (c->listen_port, 7002); /* the flag wins */
    CU_ASSERT_STRING_EQUAL (c->state_dir, "/srv/dt");
    CU_ASSERT_STRING_EQUAL (c->database_path, "/db/x.db");
    CU_ASSERT_STRING_EQUAL (c->pid_file, "/srv/dt/dtctld.pid");
    CU_ASSERT_STRING_EQUAL (c->launcher, "local");
    CU_ASSERT_EQUAL (c->heartbeat_interval_ms, 250);
    CU_ASSERT_EQUAL (c->node_timeout_ms, 2000);
    CU_ASSERT_EQUAL (c->hang_timeout_ms, 60000);
    CU_ASSERT_TRUE (config_is_admin (c, 1234));
    CU_ASSERT_FALSE (config_is_admin (c, 1235));
    CU_ASSERT_STRING_EQUAL (c->path, path);
    config_destroy (c);
}

/* Each bad value is refused, the error naming the key; nothing is returned. */
static void test_refused (void)
{
    struct {
        const char *text, *needle;
    } bad[] = {
        { "ListenPort=70000\n", "ListenPort" },
        { "Color=red\n", "Color" },
        { "Launcher=kubernetes\n", "Launcher" },
        { "AuthType=kerberos\n", "AuthType" },
        { "HeartbeatInterval=10ms\n", "HeartbeatInterval" },
        { "HeartbeatInterval=1s\nNodeTimeout=1500ms\n", "NodeTimeout" },
        { "HangTimeout=500ms\n", "HangTimeout" },
        { "RendezvousTimeout=0\n", "RendezvousTimeout" },
        { "HangTimeoutFloor=10ms\n", "HangTimeoutFloor" },
        { "LogLevel=chatty\n", "LogLevel" },
        { "StateDir=relative/dir\n", "StateDir" },
        { "CheckpointRoot=ckpt\n", "CheckpointRoot" },
        { "AdminUsers=no-such-user-dtctl\n", "AdminUsers" },
        { "MaxBodySize=10\n", "MaxBodySize" },
        { "NodeTimeout=soon\n", "NodeTimeout" },
    };
    for (size_t i = 0; i < sizeof (bad) / sizeof (bad[0]); i++) {
        dt_error_t err = { "" };
        CU_ASSERT_EQUAL_FATAL (write_conf (bad[i].text), 0);
        struct ctld_config *c = config_load (path, NULL, &err);
        CU_ASSERT_PTR_NULL (c);
        if (!strstr (err.text, bad[i].needle)) {
            fprintf (stderr, "'%s': error '%s' does not name '%s'\n", bad[i].text,
                     err.text, bad[i].needle);
            CU_FAIL ("the error names the key");
        }
        config_destroy (c);
    }
    /* A bad override is refused too, naming its key. */
    dt_error_t err = { "" };
    struct config_overrides ov = { 0 };
    CU_ASSERT_EQUAL_FATAL (write_conf ("Launcher=local\n"), 0);
    config_override (&ov, "ListenPort", "-1");
    CU_ASSERT_PTR_NULL (config_load (path, &ov, &err));
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "ListenPort"));
    /* A missing file is named. */
    CU_ASSERT_PTR_NULL (config_load ("/nonexistent/dtctld.conf", NULL, &err));
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "/nonexistent/dtctld.conf"));
}

static const struct dt_unit_test tests[] = {
    { "built-in defaults", test_defaults },
    { "a file, and flag overrides over it", test_file_and_overrides },
    { "bad values refused naming the key", test_refused },
    { NULL, NULL },
};

int main (void)
{
    int fd = mkstemp (path);
    if (fd < 0) {
        perror (path);
        return 99;
    }
    close (fd);
    int rc = dt_unit_run ("ctldconf", tests);
    unlink (path);
    return rc;
}
