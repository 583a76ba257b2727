/* The model tiers' hook for the fallback chain in classify.c (tiers.c);
 * not part of the engine API. */
#ifndef FOLIO_TIERS_H
#define FOLIO_TIERS_H

#include "engine/engine.h"

/* Tries vision, then OCR text + LM, for one document. *done = 1 when one
 * of them answered (out filled, engine_path set); otherwise the reasons
 * they were skipped are in out->fallback_reason and out->text may hold
 * the OCR text already fetched, for the rules tier. Errors only for the
 * caller's text provider failing. */
/* vlm_check_labels on the open models (0 when the model tiers are off:
 * nothing will score the labels). */
int engine_models_check_labels(struct engine_models *m, const char *const *names, int nl,
                               struct folio_err *err);
int engine_models_classify(struct engine_models *m, const char *const *names, int nl,
                           const struct engine_doc *doc, struct engine_result *out, int *done,
                           struct folio_err *err);

#endif
