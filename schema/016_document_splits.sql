-- folio schema, version 16: splits applied (issue 35). `folio split DOC`
-- (and the review page's split button) makes a new document of each part
-- of a multi-page document, along the worker's split suggestion
-- (document_segments) or pages a person names; the original stays as it is
-- and each part is linked to it here. A part's bytes are a deterministic
-- PDF of those pages, so applying the same split again finds the same
-- documents (content is identity) and adds nothing.
CREATE TABLE folio.document_splits (
    parent_id    bigint NOT NULL REFERENCES folio.documents (id) ON DELETE CASCADE,
    first_page   integer NOT NULL CHECK (first_page >= 1),
    last_page    integer NOT NULL,
    child_id     bigint NOT NULL REFERENCES folio.documents (id) ON DELETE CASCADE,
    split_by     text NOT NULL DEFAULT current_user,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (parent_id, first_page, last_page),
    CHECK (last_page >= first_page)
);
CREATE INDEX document_splits_child ON folio.document_splits (child_id);

DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'folio_reader') THEN
    GRANT SELECT ON folio.document_splits TO folio_reader;
  END IF;
END $$;
