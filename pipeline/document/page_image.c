/* The vision tier's page provider (page_image.h). */
#include "pipeline/document/page_image.h"
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
    int rc;
    if (c->pdf) {
        uint64_t tokens = c->max_image_tokens ? c->max_image_tokens : DOC_PAGE_DEFAULT_TOKENS;
        double dpi = ingest_pdf_fit_dpi(c->pdf, c->page, DOC_PAGE_MAX_SIDE, tokens * DOC_PAGE_PX_PER_TOKEN);
        rc = ingest_pdf_render(c->pdf, c->page, dpi, 3, &p, err);
    } else {
        struct ingest_decode_opts o = {.max_side = DOC_PAGE_MAX_SIDE, .channels = 3, .max_pixels = c->max_pixels,
                                       .budget = c->decode_budget, .cancel = c->cancel};
        rc = ingest_decode_page_opts(c->data, c->len, c->page, &o, &p, err);
    }
    if (rc)
        return rc;
    /* The budget bounds the decode; once the engine owns the buffer (it
     * resizes it to its own pixel plan at once) it is not tracked. */
    ingest_page_unbudget(&p);
    /* hand the buffer over: the engine frees it with free() */
    out->pixels = p.pixels;
    out->width = p.width;
    out->height = p.height;
    out->channels = p.channels;
    out->stride = p.stride;
    out->ms = folio_mono_ms() - t0;
    return 0;
}
