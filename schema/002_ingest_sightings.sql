-- ingest: what a re-run needs to recognise a sighting it already recorded.
-- A crash between the commit and the file move leaves the file in place;
-- the next run finds the same path, mtime and size and records nothing
-- new (the sha256 dedupe already keeps documents and jobs single). For
-- that, sources carry the file size and rejections the file's mtime.
ALTER TABLE folio.document_sources ADD COLUMN file_size bigint CHECK (file_size >= 0);
ALTER TABLE folio.rejections ADD COLUMN file_mtime timestamptz;
ALTER TABLE folio.rejections ADD COLUMN name_display text;
-- The re-run check looks rejections up by path.
CREATE INDEX rejections_path ON folio.rejections (path);
