/* cmd_report.c: dtctl report JOB, the goodput summary of a job
 * (GET /v1/jobs/{id}/report). */
#include <config.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orchestrator/cli/cmd.h"
#include "orchestrator/cli/ctl.h"
#include "orchestrator/cli/out.h"

/* Keys printed first and in this order when present; the rest follow in
 * the controller's order, so a newer controller's additions still show. */
static const char *const head_keys[] = { "job", "name", "state", "final", NULL };

static bool is_head (const char *key)
{
    for (int i = 0; head_keys[i]; i++)
        if (!strcmp (key, head_keys[i]))
            return true;
    return false;
}

static bool all_scalars (const json_t *o)
{
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)o, k,
                         v) if (json_is_object (v) || json_is_array (v)) return false;
    return true;
}

/* "time_s" figures also as a share of the wall time. */
static void print_scalar (const char *key, const json_t *v, double wall_s, int indent)
{
    char buf[256], t[64];
    size_t kl = strlen (key);

    if (json_is_number (v) && kl > 2 && !strcmp (key + kl - 2, "_s") &&
        !strstr (key, "per_s")) {
        double s = json_number_value (v);
        /* A share of the wall time makes sense for parts of it, not for
         * a mean time between failures. */
        if (wall_s > 0 && !strstr (key, "mtbf") && strcmp (key, "wall_s") != 0)
            printf ("%*s%-28s %10s  %5.1f%%\n", indent, "", key,
                    fmt_secs (s, t, sizeof (t)), 100.0 * s / wall_s);
        else
            printf ("%*s%-28s %10s\n", indent, "", key, fmt_secs (s, t, sizeof (t)));
    }
    else if (json_is_number (v) && (!strcmp (key, "ettr") || strstr (key, "fraction"))) {
        printf ("%*s%-28s %9.2f%%\n", indent, "", key, 100.0 * json_number_value (v));
    }
    else
        printf ("%*s%-28s %10s\n", indent, "", key, jfmt (v, "%.4g", buf, sizeof (buf)));
}

/* Most columns a row-per-entry table gets; wider ones are printed
 * turned: a row per key, a column per entry. */
#define TABLE_WIDE 16
#define TABLE_MAXCOLS 64

static void print_table (const json_t *arr, int indent)
{
    const char *cols[TABLE_MAXCOLS];
    int ncols = 0;
    size_t i, n = json_array_size (arr);
    json_t *e;
    struct table *t;

    /* Columns: the scalar keys of the rows, in first-seen order. */
    json_array_foreach (arr, i, e)
    {
        const char *k;
        json_t *v;
        json_object_foreach (e, k, v)
        {
            bool seen = false;
            if (json_is_object (v) || json_is_array (v))
                continue;
            for (int c = 0; c < ncols; c++)
                seen = seen || !strcmp (cols[c], k);
            if (!seen && ncols < TABLE_MAXCOLS)
                cols[ncols++] = k;
        }
    }
    if (ncols == 0)
        return;
    if (ncols > TABLE_WIDE && n <= TABLE_WIDE) {
        /* Turned: the first key's values head the entries' columns. */
        const char *hdr[TABLE_WIDE + 1];
        char head[TABLE_WIDE + 1][128];
        hdr[0] = cols[0];
        for (i = 0; i < n; i++)
            hdr[i + 1] = jfmt (json_object_get (json_array_get (arr, i), cols[0]), "%.4g",
                               head[i + 1], sizeof (head[i + 1]));
        t = table_create ((int)n + 1, hdr);
        for (int c = 1; c < ncols; c++) {
            char cell[TABLE_WIDE + 1][128];
            const char *row[TABLE_WIDE + 1];
            row[0] = cols[c];
            for (i = 0; i < n; i++)
                row[i + 1] = jfmt (json_object_get (json_array_get (arr, i), cols[c]),
                                   "%.4g", cell[i + 1], sizeof (cell[i + 1]));
            table_add (t, row);
        }
        table_print (t, stdout, indent);
        return;
    }
    if (ncols > TABLE_WIDE)
        ncols = TABLE_WIDE;
    {
        char *hdr[TABLE_WIDE];
        for (int c = 0; c < ncols; c++) {
            hdr[c] = strdup (cols[c]);
            for (char *p = hdr[c]; p && *p; p++)
                *p = (char)((*p >= 'a' && *p <= 'z') ? *p - 32 : *p);
        }
        t = table_create (ncols, (const char *const *)hdr);
        for (int c = 0; c < ncols; c++)
            free (hdr[c]);
    }
    json_array_foreach (arr, i, e)
    {
        char cell[TABLE_WIDE][128];
        const char *row[TABLE_WIDE];
        for (int c = 0; c < ncols; c++)
            row[c] =
              jfmt (json_object_get (e, cols[c]), "%.4g", cell[c], sizeof (cell[c]));
        table_add (t, row);
    }
    table_print (t, stdout, indent);
}

static void print_section (const char *title, const json_t *v, double wall_s, int indent)
{
    const char *k;
    json_t *m;

    if (json_is_array (v)) {
        if (json_array_size (v) == 0)
            return;
        printf ("\n%*s%s:\n", indent, "", title);
        if (json_is_object (json_array_get (v, 0)))
            print_table (v, indent + 2);
        else {
            char buf[1024];
            printf ("%*s%s\n", indent + 2, "", jfmt (v, "%.4g", buf, sizeof (buf)));
        }
        return;
    }
    printf ("\n%*s%s:\n", indent, "", title);
    /* A section's own wall time wins (per-attempt breakdowns). */
    if (jget (v, "wall_s"))
        wall_s = json_number_value (jget (v, "wall_s"));
    json_object_foreach ((json_t *)v, k, m)
    {
        if (json_is_object (m) && all_scalars (m) && json_object_size (m) > 0) {
            printf ("%*s%s:\n", indent + 2, "", k);
            const char *k2;
            json_t *m2;
            json_object_foreach (m, k2, m2) print_scalar (k2, m2, wall_s, indent + 4);
        }
        else if (json_is_object (m) || json_is_array (m))
            print_section (k, m, wall_s, indent + 2);
        else
            print_scalar (k, m, wall_s, indent + 2);
    }
}

int cmd_report (struct ctl *ctl, int argc, char **argv)
{
    static const struct option opts[] = { CMD_COMMON_OPTS, { NULL, 0, NULL, 0 } };
    const struct cmd *cmd = cmd_lookup ("report");
    char path[256], b[4][128];
    const char *id, *k;
    char *end;
    json_t *rep, *v;
    double wall_s = 0;

    while (cmd_getopt (cmd, ctl, argc, argv, ":h", opts) != -1)
        ;
    cmd_need_args (cmd, argc - optind, argv + optind, 1, "JOB (a job id)");
    id = argv[optind];
    if (strtoll (id, &end, 10) <= 0 || *end)
        cmd_usage_error (cmd->name, "JOB must be a job id (a positive integer), not '%s'",
                         id);
    rep = ctl_call (ctl, "GET",
                    ctl_path (path, sizeof (path), "/v1/jobs/", id, "/report"), NULL);
    if (ctl->json) {
        out_json (rep);
        json_decref (rep);
        return CTL_EXIT_OK;
    }
    if (jget (rep, "wall_s|time.wall_s|breakdown.wall_s"))
        wall_s = json_number_value (jget (rep, "wall_s|time.wall_s|breakdown.wall_s"));

    printf (
      "Job %s %s  state=%s%s\n", jtext (rep, "job|id", b[0], sizeof (b[0])),
      jtext (rep, "name", b[1], sizeof (b[1])), jtext (rep, "state", b[2], sizeof (b[2])),
      json_is_false (jget (rep, "final")) ? "  (live: the job is still running)" : "");
    if (jget (rep, "ettr"))
        printf ("ETTR %.2f%%  (kept training time / wall time since first start)\n",
                100.0 * json_number_value (jget (rep, "ettr")));
    json_object_foreach (rep, k, v)
    {
        if (is_head (k) || !strcmp (k, "ettr"))
            continue;
        if (json_is_object (v) || json_is_array (v))
            print_section (k, v, wall_s, 0);
        else
            print_scalar (k, v, wall_s, 0);
    }
    json_decref (rep);
    return CTL_EXIT_OK;
}
