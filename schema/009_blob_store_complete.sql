-- folio schema, version 9 (issue 18): where a document's bytes live, and the
-- completion as a server-side function for pooled workers.
--
-- 'pg': in folio.blobs (the default, and every document before this
-- version). 'fs': in a content-addressed store outside the database
-- (`--blob-store fs:/path`: ROOT/sha256/aa/bb/<hex>), which ingest wrote
-- before it committed the document; folio.blobs then has no row for it.
-- The location is per document, not per fleet, so a store can be switched
-- without migrating old documents: a worker reads each from where it is.
ALTER TABLE folio.documents
    ADD COLUMN blob_store text NOT NULL DEFAULT 'pg' CHECK (blob_store IN ('pg', 'fs'));

-- The completion as a server-side function, for workers behind a
-- transaction-mode pooler (issue 18), as 007 did for the claim: an unnamed
-- statement is parsed and planned on every call, and the completion (a
-- token-checked UPDATE, an INSERT ... ON CONFLICT and a check for a result
-- already written under the token) costs more to plan than to run. A
-- PL/pgSQL function keeps its plan per server session, which the pooler
-- keeps alive across its clients. Same statement, same answer as the
-- direct (prepared) completion in pipeline/queue.c: rows moved to done,
-- results inserted, and whether a result under this token already exists.
CREATE FUNCTION folio.complete_job(p_job bigint, p_token uuid, p_label text, p_conf real, p_review boolean,
                                   p_scores jsonb, p_engine_path text, p_fallback text, p_ocr_text text,
                                   p_ocr_conf real, p_ocr_orient smallint, p_ocr_pages jsonb, p_timings jsonb,
                                   p_worker bigint, p_review_reason text)
RETURNS TABLE (moved bigint, inserted bigint, ours boolean)
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    RETURN QUERY
    WITH d AS (
        UPDATE folio.jobs SET state = 'done', finished_at = now(), lease_token = NULL,
               lease_expires_at = NULL, last_error = NULL
         WHERE id = p_job AND lease_token = p_token AND state = 'running'
        RETURNING id, document_id, model_key, attempts),
    ins AS (
        INSERT INTO folio.results (document_id, model_key, label, confidence, needs_review,
               scores, engine_path, fallback_reason, ocr_text, ocr_confidence, ocr_orientation,
               ocr_pages, timings, worker_id, job_id, attempt, lease_token, review_reason)
        SELECT d.document_id, d.model_key, p_label, p_conf, p_review, p_scores, p_engine_path, p_fallback,
               p_ocr_text, p_ocr_conf, p_ocr_orient, p_ocr_pages, p_timings, p_worker, d.id, d.attempts,
               p_token, p_review_reason
          FROM d
        ON CONFLICT (document_id, model_key) DO NOTHING
        RETURNING 1)
    SELECT (SELECT count(*) FROM d), (SELECT count(*) FROM ins),
           EXISTS (SELECT 1 FROM folio.jobs jj JOIN folio.results r
                     ON r.document_id = jj.document_id AND r.model_key = jj.model_key
                    WHERE jj.id = p_job AND r.lease_token = p_token);
END
$$;

-- EXECUTE is PUBLIC's by default and the function runs with the caller's
-- rights (SECURITY INVOKER), so 008's grants and policies on jobs and
-- results still decide what a folio_worker login may do through it.
