/*
 * Private to pipeline/: corrections, the review policy and ocr+learned
 * models in PostgreSQL (schema/005; learn_db.c).
 */
#ifndef FOLIO_PIPELINE_LEARN_DB_H
#define FOLIO_PIPELINE_LEARN_DB_H

#include "engine/engine.h"
#include "pipeline/db/db.h"
#include "pipeline/document/doctext.h"

#include <libpq-fe.h>

/* Stored review policy of model_key into *below and *margin; untouched when
 * none is stored. */
int learn_db_policy(PGconn *c, const char *model_key, double *below, double *margin, struct folio_err *err);

/* The active model of model_key (schema 014) when its id differs from
 * have_id: *out loaded and *id set; *out NULL when it is the one held, or
 * when none is active (then *id is 0: the caller drops what it holds). */
int learn_db_latest(PGconn *c, const char *model_key, long long have_id, long long *id,
                    struct engine_learned **out, struct folio_err *err);

/* Records that document DOC (id or sha256 prefix) is LABEL (page > 0: that
 * page only). FOLIO_EINVAL naming an unknown document or label. */
int learn_db_correct(PGconn *c, const char *doc, const char *label, int page, struct folio_err *err,
                     long long *doc_id);

struct learn_train_opts {
    const char *model_key;
    int min_per_label;        /* labels with fewer examples are left out */
    double include_confident; /* > 0: also results at least this sure, not corrected */
};
/* The chain (learned, then rules) on the held-out corrections. */
struct learn_score {
    int documents, right, accepted, accepted_right, learned;
};
struct learn_train_report {
    long long model_id, corrections_upto, active_before;
    int examples, corrected, labels;
    int trained_on, held_out; /* examples learned from; corrections held out to check it */
    int active;               /* the guard let it become the active model */
    double evidence;          /* the calibrated scale (learned.c) */
    struct learn_score new_score, base_score; /* on the held-out corrections: it, and the active one (or rules) */
    size_t bytes;
    char per_label[2048];     /* JSON label -> examples */
    char comparison[320];     /* the guard's decision in words */
};
/* Trains from corrections (+ confident results) on all but the held-out
 * corrected documents (a fixed fifth, by document id), calibrates on
 * those, and stores the model: active when the chain with it is no worse
 * on them than with the active model (or, with none, the rules alone) in
 * accuracy and in precision above the review threshold; else inactive,
 * with the comparison stored and logged. The same for `folio train` and a
 * worker's automatic retrain. */
int learn_db_train(PGconn *c, const struct learn_train_opts *o, struct learn_train_report *rep, struct folio_err *err);

/* The active label set from folio.labels, in id order with its keywords. */
int learn_db_labels(PGconn *c, struct engine_labels **out, struct folio_err *err);

/* Trains when at least retrain_after corrections arrived since the newest
 * model (one worker of a fleet at a time). *trained = 1 when it did. */
int learn_db_maybe_retrain(PGconn *c, const struct learn_train_opts *o, int retrain_after, int *trained,
                           struct folio_err *err);

/* How often a worker re-reads folio.labels (worker_maint.c): a label set changed
 * longer ago than this is the one every worker classifies with. */
#define WORKER_LABELS_REFRESH_MS 10000.0

/* A label file (the format of `folio classify --labels`; errors name the
 * line), and storing a set in folio.labels (cmd_labels.c): new labels
 * added, listed ones take the file's keywords and are active; replace: the
 * others deactivated. Inside the caller's transaction. */
int labels_file_parse(const char *path, struct engine_labels **out, struct folio_err *err);
int labels_db_store(PGconn *c, const struct engine_labels *l, int replace, struct folio_err *err);

/* doc_stored_fn for a worker's job: the text of the result that `folio
 * reclassify --reuse-ocr` replaced, when the job names one (else nothing
 * stored). conn points at the worker thread's connection, which may be
 * re-made between jobs. A lookup that fails is logged
 * (stored_text_unavailable) and counts as nothing stored: the pages are
 * read again, the job never fails for it. */
struct learn_db_reuse {
    PGconn **conn;
    long long job_id;
};
int learn_db_stored_text(void *ctx, struct doc_stored *out, struct folio_err *err);

#endif
