/* reaper.h: nothing of an attempt outlives it.
 *
 * The agent makes itself a child subreaper (PR_SET_CHILD_SUBREAPER): a
 * rank's descendant that leaves its process group and session (setsid) and
 * loses its parent is reparented to the agent, not to init.  At the end of
 * the attempt reaper_kill_all SIGKILLs every descendant of the agent
 * (found in /proc by parent pid, repeatedly, until none is left) and reaps
 * them.  Slurm's proctrack/cgroup does the same for a step; the local
 * launcher has nothing else, so the agent does it on every launcher.
 */
#ifndef DT_AGENT_REAPER_H
#define DT_AGENT_REAPER_H

/* Become a child subreaper.  0, or -1 with errno set (old kernel). */
int reaper_init (void);

/* SIGKILL every descendant still alive after a 200 ms grace (the ranks' process
 * groups were just killed: what is dying already is not counted), reap them;
 * gives up after 'timeout_ms'.
 * Returns how many processes it killed. */
int reaper_kill_all (int timeout_ms);

#endif /* DT_AGENT_REAPER_H */
