/*
 * Lock discipline, checked in debug builds (compiled out with NDEBUG).
 *
 * FOLIO_MU_HELD(mu) where a function's comment says "mu held" (or "under
 * mu"): a mutex held by none fails the assert. A mutex held by another
 * thread passes too, so it catches a caller that forgot the lock, not one
 * that took it on the wrong thread. Used by the model tiers' GPU queue
 * (engine/tiers_internal.h) and the worker's slots
 * (pipeline/worker/worker_internal.h).
 */
#ifndef FOLIO_LOCKCHECK_H
#define FOLIO_LOCKCHECK_H

#include <assert.h>
#include <errno.h>
#include <pthread.h>

#define FOLIO_MU_HELD(mu) assert(pthread_mutex_trylock(mu) == EBUSY)

#endif
