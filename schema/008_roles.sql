-- folio schema, version 8: narrower roles (issue 21). Migration 001 granted
-- whole tables; an adversarial test showed what that allows: folio_worker
-- could DELETE every job, set any job done, read document_sources and
-- INSERT a forged result ahead of the real one; folio_ingest could read
-- every blob and insert jobs in any state. The grants below are what the
-- code uses (pipeline/queue.c, pipeline/ingest_db.c), column by column, and
-- row-level policies say which rows. The table owner (who runs `folio
-- migrate`) and the views are not affected: owners bypass row security.
--
-- Not closed here, and why:
--  * NOTIFY folio_jobs: PostgreSQL has no privilege for NOTIFY. A stray
--    notification only makes workers try a claim early (they poll anyway).
--  * A folio_worker login can still read the lease tokens of running jobs
--    (its own statements compare them), so it could complete a job another
--    worker holds. Closing that needs claim/complete behind SECURITY
--    DEFINER functions that keep tokens out of reach.
--  * Workers update their own row by id; the id is not tied to a login.

DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'folio_ingest') THEN
    -- blobs: written, never read back (the sha256 is the identity)
    REVOKE SELECT ON folio.blobs FROM folio_ingest;
    -- jobs: only a fresh queued job for a document; RETURNING id and the
    -- ON CONFLICT (document_id, model_key) arbiter read these columns
    REVOKE ALL ON folio.jobs FROM folio_ingest;
    GRANT INSERT (document_id, model_key) ON folio.jobs TO folio_ingest;
    GRANT SELECT (id, document_id, model_key) ON folio.jobs TO folio_ingest;
  END IF;
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'folio_worker') THEN
    -- where a file came from is not a worker's business
    REVOKE SELECT ON folio.document_sources FROM folio_worker;
    -- jobs: the lease columns, not what the job is for
    REVOKE UPDATE ON folio.jobs FROM folio_worker;
    GRANT UPDATE (state, attempts, run_after, lease_token, lease_expires_at, worker_id, last_error,
                  started_at, finished_at, claim_token) ON folio.jobs TO folio_worker;
    -- workers: its own counters and state, never another identity
    REVOKE UPDATE ON folio.workers FROM folio_worker;
    GRANT UPDATE (state, paths, paths_disabled, heartbeat_at, stopped_at, jobs_done, jobs_failed,
                  jobs_lost, detail) ON folio.workers TO folio_worker;
  END IF;
END $$;

-- jobs: workers see and lease every job, but delete only finished ones
-- (retention cleanup); ingest inserts only queued, unleased jobs.
ALTER TABLE folio.jobs ENABLE ROW LEVEL SECURITY;
CREATE POLICY jobs_select ON folio.jobs FOR SELECT USING (true);
CREATE POLICY jobs_update ON folio.jobs FOR UPDATE USING (true) WITH CHECK (true);
CREATE POLICY jobs_delete_done ON folio.jobs FOR DELETE USING (state = 'done');
CREATE POLICY jobs_insert_queued ON folio.jobs FOR INSERT
    WITH CHECK (state = 'queued' AND attempts = 0 AND lease_token IS NULL);

-- results: a row may be written only under the lease of a running job for
-- that document and model key, with that job's token. In queue_complete
-- the token-checked UPDATE to 'done' and this INSERT are one statement;
-- the check sees the statement's snapshot, where the job is still running.
ALTER TABLE folio.results ENABLE ROW LEVEL SECURITY;
CREATE POLICY results_select ON folio.results FOR SELECT USING (true);
CREATE POLICY results_insert_leased ON folio.results FOR INSERT
    WITH CHECK (EXISTS (SELECT 1 FROM folio.jobs j
                         WHERE j.id = job_id AND j.state = 'running' AND j.lease_token = results.lease_token
                           AND j.document_id = results.document_id AND j.model_key = results.model_key));

-- A job is done only with a result for its (document, model key): checked
-- at commit, so the UPDATE-then-INSERT of queue_complete passes and a bare
-- "UPDATE jobs SET state = 'done'" by a worker login fails. The owner and
-- superusers (maintenance, tests) are not checked.
CREATE FUNCTION folio.jobs_done_has_result() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF current_user = (SELECT r.rolname FROM pg_class c JOIN pg_roles r ON r.oid = c.relowner
                      WHERE c.oid = 'folio.jobs'::regclass)
     OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
    RETURN NULL;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM folio.results r
                  WHERE r.document_id = NEW.document_id AND r.model_key = NEW.model_key) THEN
    RAISE EXCEPTION 'job % set done without a result', NEW.id
      USING ERRCODE = 'check_violation',
            HINT = 'jobs are completed by folio worker (queue_complete), which writes the result in the same statement';
  END IF;
  RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER jobs_done_has_result AFTER UPDATE OF state ON folio.jobs
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN (NEW.state = 'done' AND OLD.state IS DISTINCT FROM 'done')
    EXECUTE FUNCTION folio.jobs_done_has_result();
