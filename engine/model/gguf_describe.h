/*
 * gguf_describe — a model file as `folio doctor` shows it
 * (gguf_describe.c), read through the reader (gguf.h) and the model
 * checks (gguf_model.h).
 */
#ifndef FOLIO_GGUF_DESCRIBE_H
#define FOLIO_GGUF_DESCRIBE_H

#include "common/common.h"

#include <stdio.h>

/* What `folio doctor --model F` / `--mmproj F` prints: container summary,
 * architecture, hyper-parameters, dtypes per tensor group and the device
 * memory the weights need. The kind (text / mmproj) is taken from
 * general.architecture. json: one JSON object on one line. When the file
 * fails the checks, the error goes to err, and what could be read is still
 * printed (a "check" field says why it failed). */
int gguf_describe(const char *path, int json, FILE *out, struct folio_err *err);

#endif
