-- folio schema, version 9: where a document's bytes live (issue 18).
--
-- 'pg': in folio.blobs (the default, and every document before this
-- version). 'fs': in a content-addressed store outside the database
-- (`--blob-store fs:/path`: ROOT/sha256/aa/bb/<hex>), which ingest wrote
-- before it committed the document; folio.blobs then has no row for it.
-- The location is per document, not per fleet, so a store can be switched
-- without migrating old documents: a worker reads each from where it is.
ALTER TABLE folio.documents
    ADD COLUMN blob_store text NOT NULL DEFAULT 'pg' CHECK (blob_store IN ('pg', 'fs'));
