/*
 * Private to the model tiers (tiers.c has the design and the file map):
 * the state every part shares and the calls between the parts. Not part
 * of the engine API.
 */
#ifndef FOLIO_TIERS_INTERNAL_H
#define FOLIO_TIERS_INTERNAL_H

#include "common/lockcheck.h"
#include "engine/engine.h"
#include "engine/model/lm.h"
#include "engine/tiers.h"
#include "engine/vlm.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

/* Debug builds: m->mu is held where a function says "mu held" (queue,
 * vlm pointer, reservations); common/lockcheck.h. */
#define TIERS_MU_HELD(m) FOLIO_MU_HELD(&(m)->mu)

#define ENGINE_MAX_REOPEN 3
#define GPU_BATCH_MAX 256 /* = --gpu-batch's upper bound */

enum gpu_kind { GPU_VISION, GPU_TEXT };
enum gpu_state { GPU_IDLE, GPU_QUEUED, GPU_TAKEN, GPU_DONE };

/* One page (or one OCR text) waiting for, in, or back from a GPU pass.
 * Lives on the submitting job thread's stack. */
struct gpu_item {
    enum gpu_kind kind;
    int state;                  /* enum gpu_state, guarded by m->mu */
    uint64_t gen;               /* vlm generation the page was prepared on */
    struct vlm_prepared *prep;  /* GPU_VISION */
    uint32_t page_h;            /* the page's height (fault injection) */
    double page_ms;             /* GPU_VISION: its decode time */
    int report;                 /* GPU_VISION: rc/vr are the page's outcome (else its reason is set) */
    const char *text;           /* GPU_TEXT */
    const char *const *names;
    uint32_t nl;
    struct vlm_result vr;       /* GPU_VISION result (prob/logprob: the job's arrays) */
    struct lm_text_result tr;   /* GPU_TEXT result */
    int rc;                     /* 0, or why this item failed */
    int lost;                   /* its pass lost the device */
    uint32_t batch;             /* pages in the pass that answered it */
    char msg[256];
    struct gpu_item *next;
};

struct engine_models {
    struct engine_models_config cfg;
    pthread_mutex_t mu;
    pthread_cond_t work_cv;  /* GPU thread: an item was queued, or quit */
    pthread_cond_t done_cv;  /* job threads: an item is done, the queue has room, preparers left */
    struct vlm *vlm;         /* touched on the device only by the GPU thread */
    uint64_t gen;            /* bumped whenever vlm changes: stale prepared pages are refused */
    int users;               /* job threads inside vlm_prepare on vlm (guarded by mu) */
    int busy;                /* a GPU pass runs outside mu */
    int closing;             /* a lost vlm waits for its preparers before vlm_close */
    struct gpu_item *head, *tail;
    int queued, queue_cap;
    int reserved;            /* slots held by job threads preparing pages for them */
    int quit;
    int has_thread;
    pthread_t gpu;
    int losses;            /* consecutive losses / failed re-opens */
    int gave_up;
    double retry_at_ms;
    char reason[320];      /* why a tier is off now ("" when all run) */
    _Atomic int level;     /* 2 vision+lm, 1 lm, 0 rules only: read without the lock */
    _Atomic unsigned batch;                  /* pages per pass of the open vlm (0: none open) */
    _Atomic unsigned long long after_seal_closed; /* of vlms already closed */
    _Atomic unsigned long long after_seal;   /* closed + the open one, after each pass */
    _Atomic unsigned long long passes, pages, splits;
    uint32_t fault_fail_h;   /* FOLIO_FAULT=gpu_page_fail:H (test builds) */
    uint32_t fault_nan_h;    /* FOLIO_FAULT=gpu_nan:H (test builds) */
    int fault_gather_ms;     /* FOLIO_FAULT=gpu_gather_ms:N (test builds) */
};

/* ---- the vlm's life and a page's result (tiers_models.c) ---- */

/* Which tiers run now (engine_models_paths), from m->vlm. */
void tiers_set_paths(struct engine_models *m);
/* Publishes the pipelines built after seal (closed vlms + the open one). */
void tiers_refresh_after_seal(struct engine_models *m);
/* Opens the vlm (mu held); on failure records why and whether retrying
 * can help. */
void tiers_try_open(struct engine_models *m);
/* The vlm died under us (GPU thread, mu held): closes it once no job
 * thread prepares on it; every later page falls back until the re-open. */
void tiers_lost(struct engine_models *m, const char *why);
/* Appends s to the page's fallback_reason ("; " between reasons). */
void tiers_add_reason(struct engine_result *out, const char *s);
void tiers_set_item_err(struct gpu_item *it, int rc, const char *msg, int lost_dev);
/* A model tier answered: out takes the distribution (prob, lp: malloc'd). */
void tiers_answer(struct engine_result *out, const char *const *names, int nl, double *prob, double *lp,
                  int best, double confidence, const char *path);

/* ---- the GPU thread and its queue (tiers_gpu.c) ---- */

void *tiers_gpu_main(void *arg);
/* Queue room for this thread, mu held: slots neither queued nor reserved. */
int tiers_room(const struct engine_models *m);
/* Waits (mu held) up to 50 ms for done_cv: an item done, room, preparers gone. */
void tiers_wait_a_bit(struct engine_models *m);
int tiers_cancelled(const struct engine_doc *doc);
/* Queues it and sleeps until the GPU thread answered it (mu held on entry
 * and exit). FOLIO_ETIMEOUT when the job was cancelled before its pass. */
int tiers_submit_wait(struct engine_models *m, struct gpu_item *it, const struct engine_doc *doc,
                      struct folio_err *err);
/* A window's k prepared pages: queued together (mu held), then waited for
 * (mu held on entry and exit; FOLIO_ETIMEOUT on cancel, after which the
 * queue holds none of them). A job thread queues its next window before
 * it waits for the one in flight (tiers_vision.c). */
void tiers_queue_window(struct engine_models *m, struct gpu_item *it, int k);
int tiers_wait_window(struct engine_models *m, struct gpu_item *it, int k, const struct engine_doc *doc,
                      struct folio_err *err);

#endif
