-- folio schema, version 17: filing by result (issue 35). `folio file DIR
-- --file-by PATTERN` moves each classified original from DIR/.folio/done/
-- into DIR/.folio/filed/PATTERN ({label}/{yyyy}/{mm}/{name}, ...) once its
-- result has committed, and again when a correction changes the label. One
-- row per move (or per original it could not find), newest last: where a
-- file is now is the newest row's to_path. Paths are bytes, as in
-- document_sources; the display forms beside them are escaped UTF-8. With
-- --searchable-pdf a copy with Tesseract's text layer sits beside the
-- original (NAME.searchable.pdf) and moves with it.
CREATE TABLE folio.filings (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    document_id  bigint NOT NULL REFERENCES folio.documents (id) ON DELETE CASCADE,
    source_id    bigint NOT NULL REFERENCES folio.document_sources (id) ON DELETE CASCADE,
    label        text NOT NULL,                 -- the label it was filed under
    from_path    bytea,
    to_path      bytea,                         -- NULL: not found, see note
    to_display   text,
    host         text NOT NULL,
    note         text,
    -- `folio file --searchable-pdf`: the copy with a text layer beside it
    searchable_path    bytea,
    searchable_display text,
    filed_by     text NOT NULL DEFAULT current_user,
    filed_at     timestamptz NOT NULL DEFAULT now(),
    CHECK ((to_path IS NULL) = (to_display IS NULL))
);
CREATE INDEX filings_source ON folio.filings (source_id, id DESC);
CREATE INDEX filings_document ON folio.filings (document_id);

-- The filer runs beside ingest, on the host that holds the files, so it may
-- run as folio_ingest: it reads which label a document has (result or
-- correction) and records its moves; nothing else is widened.
DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'folio_ingest') THEN
    GRANT SELECT, INSERT ON folio.filings TO folio_ingest;
    GRANT SELECT (document_id, model_key, label) ON folio.results TO folio_ingest;
    GRANT SELECT (id, document_id, page, label) ON folio.corrections TO folio_ingest;
  END IF;
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'folio_reader') THEN
    GRANT SELECT ON folio.filings TO folio_reader;
  END IF;
END $$;
