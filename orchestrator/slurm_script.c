/* slurm_script.c: the batch script of a Slurm allocation (one srun step of
 * dtagent per attempt, asking POST /v1/alloc/next what to run next when the
 * allocation outlives its attempts) and the agents' environment. */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <poll.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include "common/errprintf.h"
#include "common/log.h"
#include "common/conf.h"
#include "orchestrator/launcher.h"
#include "orchestrator/slurm_int.h"

/* Quote 's' for a POSIX shell (single quotes).  Returns new string. */
static char *shell_quote (const char *s)
{
    size_t n = 3;
    const char *p;
    char *out, *q;

    for (p = s; *p; p++)
        n += (*p == '\'') ? 4 : 1;
    if (!(out = malloc (n)))
        return NULL;
    q = out;
    *q++ = '\'';
    for (p = s; *p; p++) {
        if (*p == '\'') {
            memcpy (q, "'\\''", 4);
            q += 4;
        }
        else
            *q++ = *p;
    }
    *q++ = '\'';
    *q = '\0';
    return out;
}

/* Replace every "%n" in 'path' by 'with'.  Returns new string. */
char *subst_node (const char *path, const char *with)
{
    size_t n = strlen (path) * (strlen (with) + 1) + 1;
    char *out = malloc (n), *q = out;
    const char *p;

    if (!out)
        return NULL;
    for (p = path; *p; p++) {
        if (p[0] == '%' && p[1] == 'n') {
            q = stpcpy (q, with);
            p++;
        }
        else
            *q++ = *p;
    }
    *q = '\0';
    return out;
}

/* The batch script: the loop of the allocation.  It runs one srun step
 * per attempt, named dt-<job>-a<attempt> (poll finds an attempt's step by
 * that name), and asks the controller what next (POST /v1/alloc/next,
 * orchestrator/allocapi.c) four times a second, and twenty times a second
 * for 2 s after a step ended (the restart is decided then): run the next attempt as a
 * new step (in-allocation restart: its token, node count and the
 * nodes to avoid; in place, the nodes to run on, unless one of the
 * allocation must be avoided now), wait, or exit.  It never
 * kills a step itself: a step spanning a dead node must end through Slurm
 * (see end_steps), and a new step is exclusive, so Slurm starts it only
 * once the old one is gone.  The allocation's token is the first
 * attempt's; the controller accepts it on that route only, and only for
 * this allocation.
 *
 * The token goes to curl on its standard input (a config line), never in
 * its arguments: another user of the node reads those in /proc.
 *
 * SIGUSR1 (time-limit warning, sent to the batch shell only) is forwarded
 * to srun, which forwards it to every agent.  SIGTERM (scancel) is
 * forwarded too, so the agents stop their trainers. */
char *make_script (struct slurm_launcher *sl, const struct launcher_req *req,
                   const char *step_out)
{
    char *agent = shell_quote (sl->dtagent_path);
    char *url = shell_quote (sl->controller_url);
    char *out = step_out ? shell_quote (step_out) : NULL;
    char *script = NULL;
    int total = req->nodes + req->spare_nodes;

    if (!agent || !url || (step_out && !out))
        goto done;
    if (
      asprintf (
        &script,
        "#!/bin/bash\n"
        "# dtctl allocation runner (job %" PRId64
        ", first attempt %d): one srun step per\n"
        "# attempt, as dtctld directs (POST /v1/alloc/next).\n"
        "url=%s\n"
        "agent=%s\n"
        "alloc_token=$DT_TOKEN\n"
        "nodes=%d\n"
        "step_exclude= step_nodelist= srun_pid=\n"
        "log () { echo \"dtctl: $(date +%%T.%%3N) $*\"; }\n"
        "fwd () { [ -n \"$srun_pid\" ] && kill -\"$1\" \"$srun_pid\" 2>/dev/null; }\n"
        "trap 'log \"SIGUSR1 (time limit warning)\"; fwd USR1' USR1\n"
        "trap 'fwd TERM' TERM\n"
        "log \"Slurm job $SLURM_JOB_ID on $SLURM_JOB_NODELIST, batch host $(hostname)\"\n"
        "start_step () {\n"
        "    srun --ntasks-per-node=1 --kill-on-bad-exit=0 -N\"$nodes\" -n\"$nodes\" \\\n"
        "        -J \"dt-$DT_JOB-a$DT_ATTEMPT\" "
        "${step_exclude:+--exclude=\"$step_exclude\"} "
        "${step_nodelist:+--nodelist=\"$step_nodelist\"} %s%s \\\n"
        "        /bin/sh -c 'exec \"$0\" --controller \"$1\" --node \"$SLURMD_NODENAME\" "
        "--node-order \"$SLURM_NODEID\"' \\\n"
        "        \"$agent\" \"$url\" &\n"
        "    srun_pid=$!\n"
        "    log \"attempt $DT_ATTEMPT: step on $nodes nodes${step_exclude:+, excluding "
        "$step_exclude}${step_nodelist:+, on $step_nodelist}\"\n"
        "}\n"
        "# The step's exclusions: the controller's list plus the nodes Slurm\n"
        "# reports dead, both only where they are in the allocation.\n"
        "step_excludes () {\n"
        "    local alloc bad x out=\n"
        "    alloc=$(scontrol show hostnames \"$(squeue -h -j \"$SLURM_JOB_ID\" -o "
        "%%N)\" 2>/dev/null)\n"
        "    bad=$(sinfo -h -N -t down,no_respond,fail,drain -o %%N 2>/dev/null)\n"
        "    for x in $(echo \"$1\" | tr ',' ' ') $bad; do\n"
        "        echo \"$alloc\" | grep -qx -- \"$x\" || continue\n"
        "        case \",$out,\" in *\",$x,\"*) ;; *) out=${out:+$out,}$x ;; esac\n"
        "    done\n"
        "    echo \"$out\"\n"
        "}\n"
        "ask () {  # (the token on curl's stdin: argv is every user's to read)\n"
        "    curl -sf --max-time 5 -X POST -K - -H 'Content-Type: application/json' \\\n"
        "        -d \"{\\\"slurm_job_id\\\": $SLURM_JOB_ID, \\\"attempt\\\": "
        "$DT_ATTEMPT, \\\"step_running\\\": $1}\" \\\n"
        "        \"$url/v1/alloc/next?format=sh\" \\\n"
        "        <<< \"header = \\\"Authorization: Bearer $alloc_token\\\"\"\n"
        "}\n"
        "# a turn every 0.05 s, asking every 5th (every turn for 2 s after a step)\n"
        "rc=0 unreachable=0 answered=0 turn=0 fast=0\n"
        "start_step\n"
        "while :; do\n"
        "    running=false\n"
        "    if [ -n \"$srun_pid\" ]; then\n"
        "        if kill -0 \"$srun_pid\" 2>/dev/null; then running=true\n"
        "        else wait \"$srun_pid\"; rc=$?; srun_pid=; fast=40; log \"step of "
        "attempt $DT_ATTEMPT ended rc=$rc\"; fi\n"
        "    fi\n"
        "    turn=$((turn + 1))\n"
        "    if [ $fast -gt 0 ]; then fast=$((fast - 1))\n"
        "    elif [ $((turn %% 5)) -ne 0 ]; then sleep 0.05; continue; fi\n"
        "    action=; a_attempt=; a_token=; a_nodes=; a_exclude=; a_nodelist=\n"
        "    if ans=$(ask $running); then\n"
        "        unreachable=0; answered=1\n"
        "        while IFS='=' read -r k v; do\n"
        "            case $k in\n"
        "                action) action=$v ;; attempt) a_attempt=$v ;; token) a_token=$v "
        ";;\n"
        "                nodes) a_nodes=$v ;; exclude) a_exclude=$v ;;\n"
        "                nodelist) a_nodelist=$v ;;\n"
        "            esac\n"
        "        done <<< \"$ans\"\n"
        "    else\n"
        "        unreachable=$((unreachable + 1))\n"
        "        # The controller gone for ~10 minutes and no step left: give up.\n"
        "        if ! $running && [ $unreachable -gt 2400 ]; then log \"controller "
        "unreachable, exiting\"; break; fi\n"
        "        # No controller ever answered (the launcher driven on its own):\n"
        "        # a plain batch job, which ends with its step.\n"
        "        if ! $running && [ $answered -eq 0 ] && [ $unreachable -gt 8 ]; then\n"
        "            log \"no controller answered: ending with the step's status $rc\"; "
        "break; fi\n"
        "    fi\n"
        "    case $action in\n"
        "        run)\n"
        "            export DT_TOKEN=$a_token DT_ATTEMPT=$a_attempt\n"
        "            nodes=$a_nodes\n"
        "            step_exclude=$(step_excludes \"$a_exclude\")\n"
        "            step_nodelist=$a_nodelist  # in place: the same nodes\n"
        "            [ -n \"$step_exclude\" ] && step_nodelist=\n"
        "            start_step ;;\n"
        "        exit)\n"
        "            log \"controller: exit\"; break ;;\n"
        "    esac\n"
        "    sleep 0.05\n"
        "done\n"
        "if [ -n \"$srun_pid\" ] && kill -0 \"$srun_pid\" 2>/dev/null; then fwd TERM; "
        "fi\n"
        "exit $rc\n",
        req->job_id, req->attempt, url, agent, total,
        out ? "--open-mode=append --output=" : "", out ? out : "") < 0)
        script = NULL;
done:
    free (agent);
    free (url);
    free (out);
    return script;
}

/* Environment of the batch job (and, through srun, of every agent). */
char **make_env (struct slurm_launcher *sl, const struct launcher_req *req, int *count)
{
    size_t n = 0, cap = 8, i;
    char **env;
    const char *path = getenv ("PATH") ? getenv ("PATH") : "/usr/local/bin:/usr/bin:/bin";

    if (req->env)
        while (req->env[n])
            n++;
    cap += n;
    if (!(env = calloc (cap + 1, sizeof (*env))))
        return NULL;
    i = 0;
    /* (the job's PATH, when it sets one, replaces dtctld's, as on the
     * local launcher) */
    for (n = 0; req->env && req->env[n]; n++)
        if (!strncmp (req->env[n], "PATH=", 5))
            path = NULL;
    if (asprintf (&env[i++], "DT_TOKEN=%s", req->token ? req->token : "") < 0 ||
        asprintf (&env[i++], "DT_CONTROLLER=%s", sl->controller_url) < 0 ||
        asprintf (&env[i++], "DT_JOB=%" PRId64, req->job_id) < 0 ||
        asprintf (&env[i++], "DT_ATTEMPT=%d", req->attempt) < 0 ||
        (path && asprintf (&env[i++], "PATH=%s", path) < 0) ||
        asprintf (&env[i++], "SLURM_CONF=%s", sl->conf_path) < 0)
        goto error;
    for (n = 0; req->env && req->env[n]; n++)
        if (!(env[i++] = strdup (req->env[n])))
            goto error;
    *count = (int)i;
    return env;
error:
    for (i = 0; i < cap; i++)
        free (env[i]);
    free (env);
    return NULL;
}

void free_env (char **env)
{
    if (env) {
        for (char **p = env; *p; p++)
            free (*p);
        free (env);
    }
}

/* Comma-joined exclude list, or NULL when empty.  New string. */
char *join_exclude (const char *const *exclude)
{
    size_t len = 1;
    char *s;

    if (!exclude || !exclude[0])
        return NULL;
    for (int i = 0; exclude[i]; i++)
        len += strlen (exclude[i]) + 1;
    if (!(s = calloc (1, len)))
        return NULL;
    for (int i = 0; exclude[i]; i++) {
        if (i)
            strcat (s, ",");
        strcat (s, exclude[i]);
    }
    return s;
}
