/* series.c: downsampling of step series (see series.h). */
#include <config.h>
#include <stdbool.h>

#include "orchestrator/series.h"

static json_int_t attempt_of (json_t *row)
{
    return json_integer_value (json_object_get (row, "attempt"));
}

int series_downsample (json_t *points, int max_points)
{
    size_t n = json_array_size (points), nattempts = 0, budget, k, kept = 0;
    json_t *out;

    if (max_points < 16 || n <= (size_t)max_points)
        return 1;
    for (size_t i = 0; i < n; i++)
        if (i == 0 || attempt_of (json_array_get (points, i)) !=
                        attempt_of (json_array_get (points, i - 1)))
            nattempts++;
    /* The first and last rows of each attempt come on top of the stride. */
    budget = (size_t)max_points > 2 * nattempts + 8 ? max_points - 2 * nattempts : 8;
    k = (n + budget - 1) / budget;
    if (!(out = json_array ()))
        return 1;
    size_t pos = 0; /* index within the current attempt */
    for (size_t i = 0; i < n; i++) {
        json_t *row = json_array_get (points, i);
        bool first =
          i == 0 || attempt_of (row) != attempt_of (json_array_get (points, i - 1));
        bool last =
          i + 1 == n || attempt_of (row) != attempt_of (json_array_get (points, i + 1));
        if (first)
            pos = 0;
        if ((first || last || pos % k == 0) && kept < (size_t)max_points) {
            json_array_append (out, row);
            kept++;
        }
        pos++;
    }
    json_array_clear (points);
    json_array_extend (points, out);
    json_decref (out);
    return (int)k;
}
