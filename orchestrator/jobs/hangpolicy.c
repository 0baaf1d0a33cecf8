/* hangpolicy.c: the hang watchdog's decision (see hangpolicy.h). */
#include <config.h>
#include <string.h>

#include "orchestrator/jobs/hangpolicy.h"

enum hang_class hang_class (const struct rank *rk)
{
    return rk->stopped ? HANG_STOPPED : !rk->waiting ? HANG_NOT_WAITING : HANG_WAITING;
}

const char *hang_class_name (enum hang_class c)
{
    static const char *const names[] = { "stopped", "not waiting on its peers",
                                         "blocked in a collective" };
    return c >= HANG_STOPPED && c <= HANG_WAITING ? names[c] : "?";
}

bool hang_watched (const struct rank *rk)
{
    return rk->seen && rk->client && rk->progress_ms != 0 &&
           !strcmp (rk->state, "running");
}

bool hang_decide (const struct rank *ranks, int n, int64_t now, int64_t t_idle,
                  int64_t t_busy, struct hang_verdict *v)
{
    const struct rank *worst = NULL;

    memset (v, 0, sizeof (*v));
    v->rank = -1;
    for (int r = 0; r < n; r++) {
        const struct rank *rk = &ranks[r];
        if (!hang_watched (rk))
            continue;
        enum hang_class cls = hang_class (rk);
        int64_t t = rk->busy ? t_busy : t_idle;
        if (cls == HANG_WAITING)
            t *= HANG_WAITING_MULTIPLE;
        if (now - rk->progress_ms <= t)
            continue;
        v->over++;
        if (!worst || cls < v->cls ||
            (cls == v->cls &&
             (rk->step < worst->step ||
              (rk->step == worst->step && rk->progress_ms < worst->progress_ms)))) {
            worst = rk;
            v->rank = r;
            v->cls = cls;
            v->timeout_ms = t;
        }
    }
    if (!worst)
        return false;
    /* Ranks of the same class stalled for over half the timeout stopped
     * with the same event. */
    for (int r = 0; r < n; r++) {
        const struct rank *rk = &ranks[r];
        if (hang_watched (rk) && hang_class (rk) == v->cls &&
            now - rk->progress_ms > v->timeout_ms / 2)
            v->stalled++;
    }
    return true;
}
