-- folio schema, version 11: workers may read a document's display name
-- (issue 17: job log lines name the file). Migration 008 revoked all of
-- folio.document_sources from folio_worker ("where a file came from is
-- not a worker's business"); the file name as ingested is what an operator
-- greps the worker's log for, so the worker gets that one column (and the
-- keys to find and order it), still not the path, host or raw bytes.
DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'folio_worker') THEN
    GRANT SELECT (id, document_id, name_display) ON folio.document_sources TO folio_worker;
  END IF;
END $$;
