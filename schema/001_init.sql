-- folio schema, version 1: documents, the job queue, results and the views
-- people query. Read DESIGN.md §4 and docs/reference/pg-queue.md for why the
-- queue looks the way it does. Applied by `folio migrate` in one transaction.

-- ---------------------------------------------------------------- documents
-- One row per distinct content (sha256). The same bytes dropped twice are
-- one document with two sources.
CREATE TABLE folio.documents (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sha256        bytea NOT NULL UNIQUE CHECK (length(sha256) = 32),
    media_type    text NOT NULL,                 -- sniffed from content: image/jpeg, image/tiff, ...
    bytes         bigint NOT NULL CHECK (bytes >= 0),
    pages         integer NOT NULL CHECK (pages >= 1),
    width         integer CHECK (width > 0),     -- first page, pixels
    height        integer CHECK (height > 0),
    exif_orientation smallint CHECK (exif_orientation BETWEEN 1 AND 8),
    decode_warning text,                         -- decoder warning on an accepted file
    created_at    timestamptz NOT NULL DEFAULT now()
);

-- The file bytes, so workers on other machines can read pixels without a
-- shared file system. Scans are already compressed: store them EXTERNAL
-- (out of line, uncompressed) so PostgreSQL does not waste CPU on pglz.
CREATE TABLE folio.blobs (
    sha256  bytea PRIMARY KEY REFERENCES folio.documents (sha256) ON DELETE CASCADE,
    data    bytea NOT NULL
);
ALTER TABLE folio.blobs ALTER COLUMN data SET STORAGE EXTERNAL;

-- Every sighting of a file. File names are data: any bytes the file system
-- allows, so the raw name is bytea and a display form (escaped, valid UTF-8)
-- sits beside it.
CREATE TABLE folio.document_sources (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    document_id   bigint NOT NULL REFERENCES folio.documents (id) ON DELETE CASCADE,
    path          bytea NOT NULL,
    path_display  text NOT NULL,
    name_display  text NOT NULL,
    file_mtime    timestamptz,
    host          text NOT NULL,
    disposition   text NOT NULL DEFAULT 'moved' CHECK (disposition IN ('moved', 'deleted', 'kept')),
    duplicate     boolean NOT NULL DEFAULT false, -- content was already known
    seen_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX document_sources_document ON folio.document_sources (document_id);

CREATE TABLE folio.rejections (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    path          bytea NOT NULL,
    path_display  text NOT NULL,
    host          text NOT NULL,
    reason        text NOT NULL,   -- stable code: unsupported_format, too_large, corrupt, ...
    message       text NOT NULL,   -- one line a person can act on
    detail        jsonb,           -- limits, actual values, decoder output
    sha256        bytea CHECK (sha256 IS NULL OR length(sha256) = 32),
    bytes         bigint,
    rejected_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX rejections_time ON folio.rejections (rejected_at);

-- ------------------------------------------------------------------- labels
CREATE TABLE folio.labels (
    id           integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name         text NOT NULL UNIQUE CHECK (name ~ '^[a-z0-9_ -]+$' AND length(name) <= 64),
    description  text NOT NULL DEFAULT '',
    keywords     text[] NOT NULL DEFAULT '{}',
    active       boolean NOT NULL DEFAULT true,
    created_at   timestamptz NOT NULL DEFAULT now()
);

-- The 16 RVL-CDIP classes: a sensible default taxonomy for scanned business
-- and technical documents. Edit freely; workers read active labels at claim.
INSERT INTO folio.labels (name, description, keywords) VALUES
 ('letter', 'A business or personal letter with salutation and signature',
   '{dear,sincerely,regards,"yours truly",enclosure,letterhead}'),
 ('form', 'A form with fields, boxes or blanks to fill in',
   '{"please print",signature,date,checkbox,"fill in","office use only",applicant}'),
 ('email', 'A printed e-mail message with headers',
   '{from,to,subject,sent,cc,"original message",@}'),
 ('handwritten', 'A page written mostly by hand',
   '{handwritten,note,notes}'),
 ('advertisement', 'An advertisement, flyer or promotional page',
   '{sale,offer,free,buy,discount,"call now",limited,new}'),
 ('scientific report', 'An internal scientific or technical report',
   '{report,study,results,methods,conclusion,data,analysis,test}'),
 ('scientific publication', 'A published scientific paper or journal article',
   '{abstract,introduction,references,journal,doi,et al,university,vol}'),
 ('specification', 'A product, material or technical specification or datasheet',
   '{specification,specifications,tolerance,dimensions,requirements,standard,parameter,datasheet}'),
 ('file folder', 'A file folder cover or tab',
   '{file,folder,index,tab}'),
 ('news article', 'A newspaper or magazine article',
   '{news,reported,said,according,press,times,daily,journal}'),
 ('budget', 'A budget, financial plan or cost table',
   '{budget,total,costs,expenses,fiscal,forecast,allocation,revenue}'),
 ('invoice', 'An invoice, bill or statement requesting payment',
   '{invoice,"invoice number","amount due",payment,"bill to",total,tax,due,remit}'),
 ('presentation', 'A presentation slide or overhead',
   '{presentation,slide,agenda,overview,objectives,summary}'),
 ('questionnaire', 'A survey or questionnaire with questions to answer',
   '{questionnaire,survey,question,questions,answer,respondent,agree,disagree}'),
 ('resume', 'A resume or curriculum vitae',
   '{resume,"curriculum vitae",education,experience,employment,skills,references}'),
 ('memo', 'An internal memorandum',
   '{memo,memorandum,to,from,subject,date,re,cc}');

-- --------------------------------------------------------------------- jobs
-- The hot, small, high-churn table. One job = one (document, model key).
-- Lease columns are in no index so that heartbeats are HOT updates; the
-- fill factor leaves room on each page for those new row versions.
CREATE TABLE folio.jobs (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    document_id      bigint NOT NULL REFERENCES folio.documents (id) ON DELETE CASCADE,
    model_key        text NOT NULL DEFAULT 'default',
    state            text NOT NULL DEFAULT 'queued'
                     CHECK (state IN ('queued', 'running', 'done', 'dead')),
    priority         smallint NOT NULL DEFAULT 0,   -- higher runs first
    attempts         integer NOT NULL DEFAULT 0,    -- counted at claim
    max_attempts     integer NOT NULL DEFAULT 5 CHECK (max_attempts >= 1),
    run_after        timestamptz NOT NULL DEFAULT now(), -- backoff after a failure
    lease_token      uuid,
    lease_expires_at timestamptz,
    worker_id        bigint,
    last_error       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    started_at       timestamptz,
    finished_at      timestamptz,
    UNIQUE (document_id, model_key),
    CHECK ((state = 'running') = (lease_token IS NOT NULL))
) WITH (fillfactor = 70,
        autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 500,
        autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 500);

-- Claim order: only runnable rows are indexed.
CREATE INDEX jobs_claim ON folio.jobs (model_key, priority DESC, run_after, id) WHERE state = 'queued';
-- The reaper's scan over running jobs; state changes are not HOT anyway.
CREATE INDEX jobs_running ON folio.jobs (id) WHERE state = 'running';
-- Retention cleanup of finished jobs.
CREATE INDEX jobs_finished ON folio.jobs (finished_at) WHERE state IN ('done', 'dead');

-- ------------------------------------------------------------------ workers
CREATE TABLE folio.workers (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    host            text NOT NULL,
    pid             integer NOT NULL,
    model_key       text NOT NULL DEFAULT 'default',
    state           text NOT NULL DEFAULT 'starting'
                    CHECK (state IN ('starting', 'ready', 'ocr-only', 'draining', 'stopped')),
    device          text,               -- e.g. "NVIDIA H200 (driver 580.65)"; NULL = none
    driver          text,
    paths           text[] NOT NULL DEFAULT '{}',  -- engine paths enabled: vision, ocr+lm, ocr+rules
    paths_disabled  jsonb NOT NULL DEFAULT '{}',   -- path -> reason
    started_at      timestamptz NOT NULL DEFAULT now(),
    heartbeat_at    timestamptz NOT NULL DEFAULT now(),
    stopped_at      timestamptz,
    jobs_done       bigint NOT NULL DEFAULT 0,
    jobs_failed     bigint NOT NULL DEFAULT 0,
    detail          jsonb NOT NULL DEFAULT '{}'    -- timings of start-up steps, versions
) WITH (fillfactor = 70);

-- ------------------------------------------------------------------ results
-- Keyed by (document, model key): re-running with a new model adds a row,
-- never overwrites or duplicates one. Kept when finished jobs are deleted.
CREATE TABLE folio.results (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    document_id     bigint NOT NULL REFERENCES folio.documents (id) ON DELETE CASCADE,
    model_key       text NOT NULL,
    label           text NOT NULL,
    confidence      real NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
    needs_review    boolean NOT NULL DEFAULT false,
    scores          jsonb NOT NULL DEFAULT '{}',   -- label -> probability (and log-prob where scored)
    engine_path     text NOT NULL CHECK (engine_path IN ('vision', 'ocr+lm', 'ocr+rules')),
    fallback_reason text,                          -- why higher tiers were skipped
    ocr_text        text,
    ocr_confidence  real,
    ocr_tsv         tsvector GENERATED ALWAYS AS (to_tsvector('english', coalesce(ocr_text, ''))) STORED,
    timings         jsonb NOT NULL DEFAULT '{}',   -- stage -> milliseconds
    worker_id       bigint REFERENCES folio.workers (id) ON DELETE SET NULL,
    job_id          bigint,                        -- no FK: finished jobs are deleted by retention
    attempt         integer,
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (document_id, model_key)
);
CREATE INDEX results_label ON folio.results (label);
CREATE INDEX results_ocr_tsv ON folio.results USING gin (ocr_tsv);

-- -------------------------------------------------------------------- views
CREATE VIEW folio.document_status AS
SELECT d.id AS document_id,
       encode(d.sha256, 'hex') AS sha256,
       (SELECT s.name_display FROM folio.document_sources s
         WHERE s.document_id = d.id ORDER BY s.id LIMIT 1) AS name,
       d.media_type, d.pages, d.width, d.height, d.created_at,
       j.model_key,
       coalesce(j.state, CASE WHEN r.id IS NOT NULL THEN 'done' END) AS state,
       j.attempts, j.last_error,
       r.label, r.confidence, r.needs_review, r.engine_path, r.fallback_reason,
       r.created_at AS classified_at
  FROM folio.documents d
  LEFT JOIN folio.jobs j ON j.document_id = d.id
  LEFT JOIN folio.results r ON r.document_id = d.id
                           AND (j.id IS NULL OR r.model_key = j.model_key);

CREATE VIEW folio.queue_overview AS
SELECT model_key, state, count(*) AS jobs,
       min(created_at) AS oldest,
       count(*) FILTER (WHERE state = 'queued' AND run_after > now()) AS backing_off,
       count(*) FILTER (WHERE state = 'running' AND lease_expires_at < now()) AS lease_expired
  FROM folio.jobs
 GROUP BY model_key, state;

CREATE VIEW folio.worker_overview AS
SELECT w.id AS worker_id, w.host, w.pid, w.model_key, w.state, w.device, w.paths,
       w.paths_disabled, w.started_at, w.heartbeat_at,
       (w.state <> 'stopped' AND w.heartbeat_at > now() - interval '2 minutes') AS alive,
       w.jobs_done, w.jobs_failed,
       (SELECT count(*) FROM folio.jobs j WHERE j.worker_id = w.id AND j.state = 'running') AS running
  FROM folio.workers w;

CREATE VIEW folio.label_summary AS
SELECT r.model_key, r.label, count(*) AS documents,
       round(avg(r.confidence)::numeric, 3) AS avg_confidence,
       count(*) FILTER (WHERE r.needs_review) AS needs_review,
       count(*) FILTER (WHERE r.engine_path = 'vision') AS by_vision,
       count(*) FILTER (WHERE r.engine_path = 'ocr+lm') AS by_ocr_lm,
       count(*) FILTER (WHERE r.engine_path = 'ocr+rules') AS by_ocr_rules
  FROM folio.results r
 GROUP BY r.model_key, r.label;

CREATE VIEW folio.dead_jobs AS
SELECT j.id AS job_id, j.document_id, j.model_key, j.attempts, j.max_attempts,
       j.last_error, j.finished_at,
       (SELECT s.path_display FROM folio.document_sources s
         WHERE s.document_id = j.document_id ORDER BY s.id LIMIT 1) AS path
  FROM folio.jobs j
 WHERE j.state = 'dead';

-- -------------------------------------------------------------------- roles
-- Least privilege. Roles are cluster-wide: create them when this role may,
-- otherwise say so and carry on (a non-superuser owner can still migrate;
-- a DBA creates the roles once and re-runs the grants below).
DO $$
DECLARE r text;
BEGIN
  FOREACH r IN ARRAY ARRAY['folio_ingest', 'folio_worker', 'folio_reader'] LOOP
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) THEN
      BEGIN
        EXECUTE format('CREATE ROLE %I NOLOGIN', r);
      EXCEPTION WHEN insufficient_privilege THEN
        RAISE NOTICE 'folio: role % not created (no CREATEROLE privilege); ask a DBA to CREATE ROLE % and re-run the grants', r, r;
      END;
    END IF;
  END LOOP;

  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'folio_ingest') THEN
    GRANT USAGE ON SCHEMA folio TO folio_ingest;
    GRANT SELECT, INSERT ON folio.documents, folio.blobs, folio.document_sources,
                            folio.rejections, folio.jobs TO folio_ingest;
    GRANT SELECT ON folio.labels TO folio_ingest;
  END IF;
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'folio_worker') THEN
    GRANT USAGE ON SCHEMA folio TO folio_worker;
    GRANT SELECT ON folio.documents, folio.blobs, folio.labels, folio.document_sources TO folio_worker;
    GRANT SELECT, UPDATE, DELETE ON folio.jobs TO folio_worker;
    GRANT SELECT, INSERT ON folio.results TO folio_worker;
    GRANT SELECT, INSERT, UPDATE ON folio.workers TO folio_worker;
  END IF;
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'folio_reader') THEN
    GRANT USAGE ON SCHEMA folio TO folio_reader;
    GRANT SELECT ON folio.document_status, folio.queue_overview, folio.worker_overview,
                    folio.label_summary, folio.dead_jobs, folio.results, folio.labels,
                    folio.documents, folio.document_sources, folio.rejections TO folio_reader;
  END IF;
END $$;
