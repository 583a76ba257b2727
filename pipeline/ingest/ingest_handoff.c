/* The ingest run's outcomes on their way to the main thread, which alone
 * owns the tracker (ingest_internal.h): a list under run.mu and an eventfd
 * that wakes the main loop. */
#include "pipeline/ingest/ingest_internal.h"

#include <stdlib.h>
#include <unistd.h>

/* Queues an outcome for the main thread; takes ownership of path. */
void ingest_complete_path(struct run *R, char *path, int outcome, const struct ingest_sig *sig, int64_t retry_ms)
{
    struct completion *c = calloc(1, sizeof *c);
    if (c) {
        c->path = path;
        c->outcome = outcome;
        c->sig = *sig;
        c->retry_ms = retry_ms;
    } else {
        free(path);
    }
    pthread_mutex_lock(&R->mu);
    if (c) {
        if (R->done_tail)
            R->done_tail->next = c;
        else
            R->done_head = c;
        R->done_tail = c;
    }
    pthread_mutex_unlock(&R->mu);
    uint64_t one = 1;
    if (write(R->evfd, &one, sizeof one) < 0) {
        /* The counter cannot overflow at our rates; the main loop also
         * wakes on its own timeout. */
    }
}

void ingest_complete(struct run *R, struct ingest_item *it, int outcome, int64_t retry_ms)
{
    ingest_complete_path(R, it->cand.path, outcome, &it->cand.sig, retry_ms);
    it->cand.path = NULL; /* ownership moved to the completion */
}
