/*
 * ingest — file discovery, format sniffing, validation and decoding of
 * scans (DESIGN.md §5). Its decode API is also what workers use to turn a
 * blob back into pixels. Never includes Vulkan or libpq: enqueueing lives
 * in pipeline/, which calls into here.
 */
#ifndef FOLIO_INGEST_H
#define FOLIO_INGEST_H

#include "common/common.h"

/* Library versions ingest was built with, for `folio version`. */
const char *ingest_turbojpeg_version(void);
/* Writes the Leptonica version ("1.82.0") into buf. */
void ingest_leptonica_version(char *buf, size_t n);

#endif
