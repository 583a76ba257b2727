-- folio schema, version 7: the claim as a server-side function, for workers
-- behind a transaction-mode pooler (issue 18).
--
-- Without prepared statements (PgBouncer 1.18 has none in transaction mode)
-- every claim is planned afresh, and planning it costs more than running it:
-- the planner probes the live end of the claim index to estimate
-- run_after <= now() (measured 0.5 -> 1.6 ms per claim at 4 workers,
-- `folio bench queue`). A PL/pgSQL function keeps its statements' plans per
-- server session, which a pooler keeps alive across its clients, so the plan
-- is made once per server connection and no client-side state is needed.
--
-- The statement is the worker's own claim with LIMIT 1, run up to p_k times
-- in the one call (one round trip, one transaction): a literal LIMIT keeps
-- the generic plan on the claim index in order, where LIMIT $k would be
-- planned for 10 % of the table (a sort of every queued row). Each pass
-- takes a new snapshot, so a job claimed by an earlier pass is 'running' and
-- not seen again. The token is drawn once per row, as in the direct claim.
CREATE FUNCTION folio.claim_jobs(p_model_key text, p_lease_s float8, p_worker bigint, p_max_attempts integer,
                                 p_k integer)
RETURNS TABLE (job_id bigint, doc_id bigint, token uuid, attempt integer, max_att integer, doc_pages integer,
               sha_hex text, mtype text)
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    FOR i IN 1 .. p_k LOOP
        RETURN QUERY
        WITH c AS (
            SELECT q.id, gen_random_uuid() AS tok FROM folio.jobs q
             WHERE q.state = 'queued' AND q.model_key = p_model_key AND q.run_after <= now()
             ORDER BY q.priority DESC, q.run_after, q.id
             LIMIT 1 FOR UPDATE SKIP LOCKED)
        UPDATE folio.jobs j SET state = 'running', attempts = j.attempts + 1,
               lease_token = c.tok, claim_token = c.tok,
               lease_expires_at = now() + make_interval(secs => p_lease_s),
               worker_id = p_worker, started_at = now(), finished_at = NULL
          FROM c, folio.documents d
         WHERE j.id = c.id AND d.id = j.document_id
        RETURNING j.id, j.document_id, j.lease_token, j.attempts,
                  CASE WHEN p_max_attempts > 0 THEN p_max_attempts ELSE j.max_attempts END,
                  d.pages, encode(d.sha256, 'hex'), d.media_type;
        IF NOT FOUND THEN
            EXIT;
        END IF;
    END LOOP;
END
$$;
