-- folio schema, version 19 (issue 32): re-ingesting the original repairs
-- a corrupt or missing folio.blobs row.
--
-- Workers check the bytes they read against the document's sha256 and fail
-- the job with "stored bytes are corrupt ... re-ingest the original" when
-- they differ (pipeline/queue.c). Before this version the re-ingest could
-- not repair anything: known content is a duplicate, so ingest recorded a
-- sighting and never wrote the bytes again (with --after delete the only
-- good copy was then deleted). Ingest may not read blobs (008: written,
-- never read back), so it cannot see that the stored copy is bad; this
-- owner's function looks for it.
--
-- It writes only bytes that hash to the name they are stored under, and
-- only for a document that keeps its bytes in folio.blobs: a caller can put
-- back the good copy and nothing else. A good row is left alone. The cost
-- is hashing the incoming bytes and the stored ones, once per duplicate.
-- Returns true when it wrote a row, NULL when there was nothing to do.
CREATE FUNCTION folio.blob_repair(p_sha256 bytea, p_data bytea) RETURNS boolean
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO folio.blobs (sha256, data)
    SELECT p_sha256, p_data
     WHERE pg_catalog.sha256(p_data) = p_sha256
       AND EXISTS (SELECT 1 FROM folio.documents d WHERE d.sha256 = p_sha256 AND d.blob_store = 'pg')
    ON CONFLICT (sha256) DO UPDATE SET data = EXCLUDED.data
     WHERE pg_catalog.sha256(folio.blobs.data) <> folio.blobs.sha256
    RETURNING true
$$;

-- A function is executable by PUBLIC unless revoked: this one acts as the
-- owner, so only ingest may call it.
REVOKE ALL ON FUNCTION folio.blob_repair(bytea, bytea) FROM PUBLIC;
DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'folio_ingest') THEN
    GRANT EXECUTE ON FUNCTION folio.blob_repair(bytea, bytea) TO folio_ingest;
  END IF;
END $$;
