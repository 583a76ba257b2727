-- folio schema, version 12 (issue 32): a folio_worker login can do a
-- worker's work and nothing else. An adversarial pass with 008's grants
-- read another worker's lease token and completed that job with its own
-- label, inserted results for queued and dead jobs, page results and split
-- suggestions for any document, marked every queued job dead or never-run,
-- and inserted a learned model every worker then loaded.
--
-- Now every write a worker makes goes through the SECURITY DEFINER
-- functions below (owned by the schema owner, fixed search_path, every
-- name schema-qualified), which check the lease token AND that the worker
-- id is one this login registered (folio.workers.login). folio_worker keeps
-- no INSERT, UPDATE or DELETE on jobs, results, page_results,
-- document_segments, workers or learned_models, and cannot read a lease
-- token (the column privileges leave lease_token and claim_token out).
-- Learned models are written by folio_trainer alone (`folio learn train`
-- and a worker's --retrain-after run under a login granted it), and a
-- model is at most 8 MiB: every worker thread loads the newest one.
--
-- The token remains the capability for one job: whoever claimed it learns
-- it from the claim's answer and nobody else can read it. The login check
-- ties a worker row to the login that registered it; behind a pooler that
-- is the pooler's login, shared by all its clients.

ALTER TABLE folio.workers ADD COLUMN login text;

-- The owner of the schema (the role migrations run as) and superusers act
-- for any worker: tests, `folio jobs`, maintenance.
CREATE FUNCTION folio.worker_is_mine(p_worker bigint) RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
    SELECT p_worker IS NULL
        OR EXISTS (SELECT 1 FROM folio.workers w WHERE w.id = p_worker AND w.login = session_user)
        OR session_user = (SELECT r.rolname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_roles r ON r.oid = c.relowner
                            WHERE c.oid = 'folio.jobs'::regclass)
        OR (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = session_user)
$$;

CREATE FUNCTION folio.worker_check(p_worker bigint) RETURNS void
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT folio.worker_is_mine(p_worker) THEN
        RAISE EXCEPTION 'worker % was not registered by login %', p_worker, session_user
          USING ERRCODE = 'insufficient_privilege',
                HINT = 'a worker acts only under the id folio.worker_register gave its own login';
    END IF;
END $$;

CREATE FUNCTION folio.worker_register(p_host text, p_pid integer, p_model_key text, p_state text, p_device text,
                                      p_paths text[], p_paths_disabled jsonb, p_detail jsonb)
RETURNS bigint
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO folio.workers (host, pid, model_key, state, device, paths, paths_disabled, detail, login)
    VALUES (p_host, p_pid, p_model_key, p_state, p_device, p_paths, p_paths_disabled, p_detail, session_user)
    RETURNING id
$$;

CREATE FUNCTION folio.worker_stopped(p_worker bigint, p_done bigint, p_failed bigint, p_lost bigint)
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM folio.worker_check(p_worker);
    UPDATE folio.workers SET state = 'stopped', stopped_at = now(), heartbeat_at = now(),
           jobs_done = p_done, jobs_failed = p_failed, jobs_lost = p_lost
     WHERE id = p_worker;
END $$;

-- The claim of 007 (same statement, same plan reasoning), as the owner.
CREATE OR REPLACE FUNCTION folio.claim_jobs(p_model_key text, p_lease_s float8, p_worker bigint,
                                            p_max_attempts integer, p_k integer)
RETURNS TABLE (job_id bigint, doc_id bigint, token uuid, attempt integer, max_att integer, doc_pages integer,
               sha_hex text, mtype text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    PERFORM folio.worker_check(p_worker);
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

-- One heartbeat for the worker row and all its leases; answers the jobs
-- still held (a job missing from the answer was lost).
CREATE FUNCTION folio.heartbeat_jobs(p_ids bigint[], p_tokens uuid[], p_worker bigint, p_done bigint,
                                     p_failed bigint, p_lost bigint, p_state text, p_lease_s float8,
                                     p_paths text[], p_paths_disabled jsonb)
RETURNS TABLE (job_id bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    PERFORM folio.worker_check(p_worker);
    UPDATE folio.workers SET heartbeat_at = now(), jobs_done = p_done, jobs_failed = p_failed,
           jobs_lost = p_lost, state = coalesce(p_state, state), paths = coalesce(p_paths, paths),
           paths_disabled = coalesce(p_paths_disabled, paths_disabled)
     WHERE id = p_worker;
    RETURN QUERY
    UPDATE folio.jobs j SET lease_expires_at = now() + make_interval(secs => p_lease_s)
      FROM unnest(p_ids, p_tokens) AS h(id, tok)
     WHERE j.id = h.id AND j.lease_token = h.tok AND j.state = 'running'
       AND j.worker_id IS NOT DISTINCT FROM p_worker
    RETURNING j.id;
END
$$;

-- The completion of 009, as the owner, for the holder of the lease only.
CREATE OR REPLACE FUNCTION folio.complete_job(p_job bigint, p_token uuid, p_label text, p_conf real,
                                              p_review boolean, p_scores jsonb, p_engine_path text,
                                              p_fallback text, p_ocr_text text, p_ocr_conf real,
                                              p_ocr_orient smallint, p_ocr_pages jsonb, p_timings jsonb,
                                              p_worker bigint, p_review_reason text)
RETURNS TABLE (moved bigint, inserted bigint, ours boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    PERFORM folio.worker_check(p_worker);
    RETURN QUERY
    WITH d AS (
        UPDATE folio.jobs SET state = 'done', finished_at = now(), lease_token = NULL,
               lease_expires_at = NULL, last_error = NULL
         WHERE id = p_job AND lease_token = p_token AND state = 'running'
           AND worker_id IS NOT DISTINCT FROM p_worker
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

-- A failed attempt: back to queued with backoff and jitter, or dead.
CREATE FUNCTION folio.fail_job(p_job bigint, p_token uuid, p_worker bigint, p_max_attempts integer,
                               p_base_s float8, p_cap_s float8, p_error text)
RETURNS TABLE (new_state text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    PERFORM folio.worker_check(p_worker);
    RETURN QUERY
    UPDATE folio.jobs SET
           state = CASE WHEN attempts >= coalesce(p_max_attempts, max_attempts) THEN 'dead' ELSE 'queued' END,
           run_after = now() + make_interval(secs => least(p_cap_s,
               p_base_s * power(2, greatest(attempts - 1, 0))) * (0.5 + random())),
           finished_at = CASE WHEN attempts >= coalesce(p_max_attempts, max_attempts) THEN now() END,
           lease_token = NULL, lease_expires_at = NULL, last_error = p_error
     WHERE id = p_job AND lease_token = p_token AND state = 'running'
       AND worker_id IS NOT DISTINCT FROM p_worker
    RETURNING state;
END
$$;

-- Back to queued without spending the attempt (shutdown, a document this
-- worker cannot read). 1 when released.
CREATE FUNCTION folio.release_job(p_job bigint, p_token uuid, p_worker bigint) RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE n integer;
BEGIN
    PERFORM folio.worker_check(p_worker);
    UPDATE folio.jobs SET state = 'queued', attempts = greatest(attempts - 1, 0),
           run_after = now(), lease_token = NULL, lease_expires_at = NULL
     WHERE id = p_job AND lease_token = p_token AND state = 'running'
       AND worker_id IS NOT DISTINCT FROM p_worker;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

-- The reaper: any worker may run it; it touches only expired leases.
CREATE FUNCTION folio.reap_jobs(p_max_attempts integer, p_base_s float8, p_cap_s float8, p_lock bigint)
RETURNS TABLE (ran boolean, requeued bigint, died bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY
    WITH g AS MATERIALIZED (SELECT pg_try_advisory_xact_lock(p_lock) AS got),
    r AS (
        UPDATE folio.jobs j SET
               state = CASE WHEN j.attempts >= coalesce(p_max_attempts, j.max_attempts) THEN 'dead' ELSE 'queued' END,
               run_after = now() + make_interval(secs => least(p_cap_s,
                   p_base_s * power(2, greatest(j.attempts - 1, 0))) * (0.5 + random())),
               finished_at = CASE WHEN j.attempts >= coalesce(p_max_attempts, j.max_attempts) THEN now() END,
               last_error = 'lease expired: worker ' || coalesce(j.worker_id::text, '?')
                            || ' stopped renewing it during attempt ' || j.attempts,
               lease_token = NULL, lease_expires_at = NULL
          FROM g
         WHERE g.got AND j.state = 'running' AND j.lease_expires_at < now()
        RETURNING j.state)
    SELECT (SELECT got FROM g), count(*) FILTER (WHERE r.state = 'queued'),
           count(*) FILTER (WHERE r.state = 'dead') FROM r;
END
$$;

-- Retention: finished jobs older than p_retain_s (at least a minute, so a
-- worker login cannot empty the done list that status and report show).
CREATE FUNCTION folio.cleanup_jobs(p_retain_s float8, p_limit integer, p_lock bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE n bigint;
BEGIN
    WITH g AS MATERIALIZED (SELECT pg_try_advisory_xact_lock(p_lock) AS got),
    del AS (
        DELETE FROM folio.jobs WHERE id IN (
            SELECT j.id FROM folio.jobs j, g
             WHERE g.got AND j.state = 'done'
               AND j.finished_at < now() - make_interval(secs => greatest(p_retain_s, 60))
             ORDER BY j.finished_at LIMIT p_limit FOR UPDATE OF j SKIP LOCKED)
        RETURNING 1)
    SELECT count(*) INTO n FROM del;
    RETURN n;
END
$$;

-- A learned model every worker thread loads: bounded.
ALTER TABLE folio.learned_models
    ADD CONSTRAINT learned_models_size CHECK (octet_length(model) <= 8388608);

DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'folio_trainer') THEN
    BEGIN
      CREATE ROLE folio_trainer NOLOGIN;
    EXCEPTION WHEN insufficient_privilege THEN
      RAISE NOTICE 'folio: role folio_trainer not created (no CREATEROLE privilege); ask a DBA to CREATE ROLE folio_trainer and re-run migration 012''s grants';
    END;
  END IF;
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'folio_worker') THEN
    REVOKE INSERT, UPDATE, DELETE ON folio.jobs, folio.results, folio.page_results, folio.document_segments,
                                    folio.workers, folio.learned_models FROM folio_worker;
    -- every column but the tokens
    REVOKE SELECT ON folio.jobs FROM folio_worker;
    GRANT SELECT (id, document_id, model_key, state, priority, attempts, max_attempts, run_after,
                  lease_expires_at, worker_id, last_error, created_at, started_at, finished_at,
                  reuse_text_from) ON folio.jobs TO folio_worker;
  END IF;
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'folio_trainer') THEN
    GRANT USAGE ON SCHEMA folio TO folio_trainer;
    GRANT SELECT ON folio.corrections, folio.results, folio.page_results, folio.documents, folio.labels,
                    folio.learned_models, folio.review_policy TO folio_trainer;
    GRANT INSERT ON folio.learned_models TO folio_trainer;
  END IF;
  -- folio_reader: every read-only command (status, show, report, jobs
  -- list) reads these; never blob bytes or a lease token.
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'folio_reader') THEN
    GRANT SELECT (id, document_id, model_key, state, priority, attempts, max_attempts, run_after,
                  lease_expires_at, worker_id, last_error, created_at, started_at, finished_at,
                  reuse_text_from) ON folio.jobs TO folio_reader;
    GRANT SELECT ON folio.workers, folio.schema_migrations TO folio_reader;
  END IF;
END $$;

-- A function is executable by PUBLIC unless revoked: these act as the
-- owner, so only the roles that need them may call them.
REVOKE ALL ON FUNCTION folio.worker_is_mine(bigint), folio.worker_check(bigint),
    folio.worker_register(text, integer, text, text, text, text[], jsonb, jsonb),
    folio.worker_stopped(bigint, bigint, bigint, bigint),
    folio.claim_jobs(text, float8, bigint, integer, integer),
    folio.heartbeat_jobs(bigint[], uuid[], bigint, bigint, bigint, bigint, text, float8, text[], jsonb),
    folio.complete_job(bigint, uuid, text, real, boolean, jsonb, text, text, text, real, smallint, jsonb, jsonb,
                       bigint, text),
    folio.fail_job(bigint, uuid, bigint, integer, float8, float8, text),
    folio.release_job(bigint, uuid, bigint),
    folio.reap_jobs(integer, float8, float8, bigint),
    folio.cleanup_jobs(float8, integer, bigint) FROM PUBLIC;
DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'folio_worker') THEN
    GRANT EXECUTE ON FUNCTION folio.worker_is_mine(bigint), folio.worker_check(bigint),
        folio.worker_register(text, integer, text, text, text, text[], jsonb, jsonb),
        folio.worker_stopped(bigint, bigint, bigint, bigint),
        folio.claim_jobs(text, float8, bigint, integer, integer),
        folio.heartbeat_jobs(bigint[], uuid[], bigint, bigint, bigint, bigint, text, float8, text[], jsonb),
        folio.complete_job(bigint, uuid, text, real, boolean, jsonb, text, text, text, real, smallint, jsonb,
                           jsonb, bigint, text),
        folio.fail_job(bigint, uuid, bigint, integer, float8, float8, text),
        folio.release_job(bigint, uuid, bigint),
        folio.reap_jobs(integer, float8, float8, bigint),
        folio.cleanup_jobs(float8, integer, bigint) TO folio_worker;
  END IF;
END $$;
