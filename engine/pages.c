/*
 * Split suggestions from per-page results (the rule is in engine.h, next
 * to engine_pages_segments). Pure arithmetic over engine_results: no
 * model, no I/O, so the rule is tested on its own (test_page_segments)
 * and is the same for every tier that answered a page.
 */
#include "engine/engine.h"

#include <string.h>

/* Probability page r gives label name (0 for "unknown" or a name it does
 * not score). */
static double prob_of(const struct engine_result *r, const char *name)
{
    if (!r->scores || !r->names)
        return 0;
    for (int i = 0; i < r->n_labels; i++)
        if (strcmp(r->names[i], name) == 0)
            return r->scores[i];
    return 0;
}

int engine_pages_segments(const struct engine_result *pages, int n, struct engine_segment *out)
{
    if (n <= 0)
        return 0;
    int ns = 0;
    double sum = 0;
    for (int p = 0; p < n; p++) {
        const struct engine_result *r = &pages[p];
        int opens = p == 0;
        if (!opens && strcmp(r->label, out[ns - 1].label) != 0 && strcmp(r->label, ENGINE_UNKNOWN_LABEL) != 0 &&
            r->confidence >= ENGINE_SEGMENT_MIN_CONF &&
            r->confidence - prob_of(r, out[ns - 1].label) >= ENGINE_SEGMENT_MARGIN)
            opens = 1;
        if (opens) {
            if (ns > 0)
                out[ns - 1].confidence = sum / (out[ns - 1].last_page - out[ns - 1].first_page + 1);
            struct engine_segment *s = &out[ns++];
            s->first_page = s->last_page = p;
            snprintf(s->label, sizeof s->label, "%s", r->label);
            sum = 0;
        }
        out[ns - 1].last_page = p;
        sum += prob_of(r, out[ns - 1].label);
    }
    out[ns - 1].confidence = sum / (out[ns - 1].last_page - out[ns - 1].first_page + 1);
    return ns;
}
