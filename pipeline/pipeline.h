/*
 * Transitional: pipeline.h was split by module (issue 20). Include the
 * header you need instead: pipeline/cli.h (exit codes, option tables),
 * pipeline/db.h, pipeline/migrate.h, pipeline/queue.h, pipeline/worker.h,
 * pipeline/commands.h. Nothing in the tree includes this file; it stays
 * only so branches written before the split still build, and goes once
 * they are merged.
 */
#ifndef FOLIO_PIPELINE_H
#define FOLIO_PIPELINE_H

#include "common/json.h"
#include "pipeline/cli.h"
#include "pipeline/commands.h"
#include "pipeline/db.h"
#include "pipeline/migrate.h"
#include "pipeline/queue.h"
#include "pipeline/worker.h"

#endif
