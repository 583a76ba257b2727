-- folio schema, version 18: where an ingested file is now (issue 34).
--
-- A source row records the path a file had in the inbox; after the commit
-- ingest moves it (to DIR/.folio/done/DATE/, with ".N" before the
-- extension when that name is taken), deletes it or keeps it, so the path
-- alone does not say where to find the file. ingest writes the display form
-- of the file's location after its disposition, one statement per batch:
-- the new path when moved, the same path when kept, NULL when deleted (or
-- for rows from before this version, and when that statement could not
-- run: the file is where path_display or disposition says).
ALTER TABLE folio.document_sources ADD COLUMN stored_at text;

DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'folio_ingest') THEN
    GRANT UPDATE (stored_at) ON folio.document_sources TO folio_ingest;
  END IF;
END $$;
