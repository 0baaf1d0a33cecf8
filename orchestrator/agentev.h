/* agentev.h: the checks of the events agents send (agentev.c). */
#ifndef DT_AGENTEV_H
#define DT_AGENTEV_H

#include <jansson.h>
#include "common/errprintf.h"

struct attempt;

/* Check one event of an agent of 'att' (its kind known, its members of
 * that kind, each in range; 'path' names it in err): 0, or -1 with err
 * naming the member.  Nothing is changed either way. */
int agentev_check (struct attempt *att, json_t *e, const char *path, dt_error_t *err);

#endif
