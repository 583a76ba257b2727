/* The vision tier's page provider (docpage.h). */
#include "pipeline/docpage.h"
#include "ingest/ingest.h"

#include <stdlib.h>
#include <string.h>

int worker_doc_page(void *ctx, struct engine_page *out, struct folio_err *err)
{
    const struct doc_page_ctx *c = ctx;
    memset(out, 0, sizeof *out);
    double t0 = folio_mono_ms();
    struct ingest_page p;
    memset(&p, 0, sizeof p);
    int rc = ingest_decode_page_capped(c->data, c->len, 0, DOC_PAGE_MAX_SIDE, 3, c->max_pixels, &p, err);
    if (rc)
        return rc;
    /* hand the buffer over: the engine frees it with free() */
    out->pixels = p.pixels;
    out->width = p.width;
    out->height = p.height;
    out->channels = p.channels;
    out->stride = p.stride;
    out->ms = folio_mono_ms() - t0;
    return 0;
}
