/* The document list of the review page and `folio search` (review.h). */
#include "pipeline/db/db.h"
#include "pipeline/review/review.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

static const char *nz(const char *s)
{
    return s && *s ? s : NULL;
}

static int is_date(const char *s)
{
    if (strlen(s) != 10 || s[4] != '-' || s[7] != '-')
        return 0;
    for (int i = 0; i < 10; i++)
        if (i != 4 && i != 7 && !isdigit((unsigned char)s[i]))
            return 0;
    return 1;
}

int doc_filter_check(const struct doc_filter *f, struct folio_err *err)
{
    const char *d[2] = {nz(f->from), nz(f->to)};
    for (int i = 0; i < 2; i++)
        if (d[i] && !is_date(d[i])) {
            folio_err_set(err, FOLIO_EINVAL, "'%s' is not a date", d[i]);
            folio_err_hint(err, "write dates as YYYY-MM-DD, for example 2026-03-31");
            return FOLIO_EINVAL;
        }
    const char *t = nz(f->tier);
    if (t && strcmp(t, "vision") && strcmp(t, "ocr+lm") && strcmp(t, "ocr+learned") && strcmp(t, "ocr+rules")) {
        folio_err_set(err, FOLIO_EINVAL, "no engine tier '%s'", t);
        folio_err_hint(err, "the tiers are vision, ocr+lm, ocr+learned and ocr+rules");
        return FOLIO_EINVAL;
    }
    return 0;
}

int doc_query(PGconn *c, const struct doc_filter *f, PGresult **out, struct folio_err *err)
{
    *out = NULL;
    if (doc_filter_check(f, err))
        return FOLIO_EINVAL;
    static const char *REVIEW[] = {"open", "flagged", "all"};
    char lim[16];
    snprintf(lim, sizeof lim, "%d", f->limit > 0 ? f->limit : 50);
    const char *p[] = {nz(f->model_key), nz(f->label), nz(f->tier), nz(f->from), nz(f->to),
                       REVIEW[f->review], nz(f->query), lim};
    /* The filters and the ranking run on the index and the result rows
     * (the query is spelled out where it is used, not in a CTE, so that
     * the plan for the given values folds "$7 IS NULL OR" away and the
     * GIN index on ocr_tsv serves the match);
     * names, corrections and snippets (ts_headline reads the whole text)
     * only for the rows shown. Dates are UTC days. */
    PGresult *r = PQexecParams(
        c,
        "WITH hit AS (SELECT r.id, r.document_id, r.label, r.confidence, r.engine_path, r.review_reason, "
        "        r.needs_review, r.created_at, r.model_key, r.ocr_text, "
        "        CASE WHEN $7::text IS NULL THEN 0 "
        "             ELSE ts_rank_cd(r.ocr_tsv, websearch_to_tsquery('english', $7::text)) END AS rank "
        "   FROM folio.results r "
        "  WHERE ($1::text IS NULL OR r.model_key = $1) AND ($2::text IS NULL OR r.label = $2) "
        "    AND ($3::text IS NULL OR r.engine_path = $3) "
        "    AND ($4::date IS NULL OR r.created_at >= ($4::date)::timestamp AT TIME ZONE 'UTC') "
        "    AND ($5::date IS NULL OR r.created_at < ($5::date + 1)::timestamp AT TIME ZONE 'UTC') "
        "    AND CASE $6::text WHEN 'all' THEN true WHEN 'flagged' THEN r.needs_review "
        "        ELSE r.needs_review AND NOT EXISTS (SELECT 1 FROM folio.corrections k "
        "                                             WHERE k.document_id = r.document_id) END "
        "    AND ($7::text IS NULL OR r.ocr_tsv @@ websearch_to_tsquery('english', $7::text)) "
        "  ORDER BY rank DESC, r.confidence, r.id LIMIT $8::int) "
        "SELECT h.document_id, coalesce((SELECT s.name_display FROM folio.document_sources s "
        "        WHERE s.document_id = h.document_id ORDER BY s.id LIMIT 1), ''), "
        "       h.label, round(h.confidence::numeric, 3), h.engine_path, coalesce(h.review_reason, ''), d.pages, "
        "       h.needs_review, coalesce((SELECT k.label || CASE WHEN k.page IS NULL THEN '' "
        "        ELSE ' (page ' || k.page || ')' END FROM folio.corrections k "
        "        WHERE k.document_id = h.document_id ORDER BY k.id DESC LIMIT 1), ''), "
        "       to_char(h.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD'), round(h.rank::numeric, 4), "
        "       CASE WHEN $7::text IS NULL THEN '' ELSE ts_headline('english', coalesce(h.ocr_text, ''), "
        "        websearch_to_tsquery('english', $7::text), "
        "        'StartSel=[, StopSel=], MaxWords=18, MinWords=6, MaxFragments=1') END, h.id, h.model_key, "
        "       (SELECT count(*) FROM folio.document_segments s WHERE s.result_id = h.id), "
        "       coalesce((SELECT string_agg(format('#%s (pages %s-%s)', s.child_id, s.first_page, s.last_page), "
        "        ', ' ORDER BY s.first_page) FROM folio.document_splits s WHERE s.parent_id = h.document_id), '') "
        "  FROM hit h JOIN folio.documents d ON d.id = h.document_id "
        " ORDER BY h.rank DESC, h.confidence, h.id",
        8, NULL, p, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        db_err_from_result(r, c, "listing documents", err);
        if (strstr(err->msg, "42P01") || strstr(err->msg, "42703"))
            folio_err_hint(err, "the schema is missing or old: run folio migrate first");
        return err->code ? err->code : FOLIO_EDB;
    }
    *out = r;
    return 0;
}
