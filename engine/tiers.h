/* The model tiers' hooks for the fallback chain in classify.c (tiers.c);
 * not part of the engine API. */
#ifndef FOLIO_TIERS_H
#define FOLIO_TIERS_H

#include "engine/engine.h"

/* vlm_check_labels on the open models (0 when the model tiers are off:
 * nothing will score the labels). */
int engine_models_check_labels(struct engine_models *m, const char *const *names, int nl,
                               struct folio_err *err);

/* The model tiers over the n pages of one document, in three steps so the
 * caller can finish each page in order (engine_classify_pages):
 *  1. engine_models_begin: re-opens a lost GPU past its backoff; returns
 *     2 (vision and ocr+lm run), 1 (ocr+lm only) or 0 (none), and adds
 *     why a tier is off to every page's fallback_reason;
 *  2. engine_models_vision (level 2): tier 1 for every page, up to the
 *     GPU batch of them prepared and queued together; a page it answered
 *     has engine_path "vision", any other its reason. Errors:
 *     FOLIO_ETIMEOUT (cancelled; nothing of a pass is left behind),
 *     FOLIO_EDEVICELOST under the release policy; *failed (may be NULL)
 *     is then the first page of the window that failed;
 *  3. engine_models_text (level >= 1), per page vision did not answer:
 *     the page's text (its provider, on this thread) and tier 2. *done = 1
 *     when it answered; errors from the text provider, FOLIO_ETIMEOUT,
 *     FOLIO_EDEVICELOST as above. */
int engine_models_begin(struct engine_models *m, struct engine_result *outs, int n);
int engine_models_vision(struct engine_models *m, const char *const *names, int nl,
                         const struct engine_doc *docs, int n, struct engine_result *outs, int *failed,
                         struct folio_err *err);
int engine_models_text(struct engine_models *m, const char *const *names, int nl, const struct engine_doc *doc,
                       struct engine_result *out, int *done, struct folio_err *err);

#endif
