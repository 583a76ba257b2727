-- folio schema, version 3: what the worker fleet (issue 4) records beyond
-- schema 001.
--
-- claim_token: the lease token of the job's latest claim, kept after the job
-- finishes (lease_token is cleared then). results.lease_token records the
-- token that wrote the result, so "no stale writer won" is a plain SQL check:
--   SELECT count(*) FROM folio.results r JOIN folio.jobs j ON j.id = r.job_id
--    WHERE r.lease_token IS DISTINCT FROM j.claim_token OR r.attempt <> j.attempts;
-- It also lets a worker whose COMMIT acknowledgement was lost find out, after
-- reconnecting, that its result did land.
ALTER TABLE folio.jobs ADD COLUMN claim_token uuid;
ALTER TABLE folio.results ADD COLUMN lease_token uuid;

-- OCR facts beyond the text: how far the first page was turned (OSD) and how
-- many pages were read, skipped over --ocr-max-pages, or cut by the deadline.
ALTER TABLE folio.results ADD COLUMN ocr_orientation smallint
    CHECK (ocr_orientation IN (0, 90, 180, 270));
ALTER TABLE folio.results ADD COLUMN ocr_pages jsonb;

-- Jobs a worker lost to an expired lease (heartbeat missing or refused).
ALTER TABLE folio.workers ADD COLUMN jobs_lost bigint NOT NULL DEFAULT 0;
