-- folio schema, version 4: per-page results and split suggestions (issue 15).
--
-- Every page of a multi-page document (up to --max-pages-classified) is
-- classified on its own; the document's row in folio.results is derived
-- from its pages (the first page's label, confidence and distribution), and
-- the pages land here. Contiguous page runs whose labels differ by a
-- confidence margin become document_segments: suggestions for a person to
-- review, never automatic splits.
--
-- The worker sends the pages inside results.ocr_pages ("results" and
-- "segments" arrays) and the trigger below expands them, so they are written
-- by the same token-checked statement as the result: a completion that loses
-- its lease writes no result and no pages, and ON CONFLICT DO NOTHING on the
-- result (a second model run of the same key) fires no trigger either.
CREATE TABLE folio.page_results (
    result_id       bigint NOT NULL REFERENCES folio.results (id) ON DELETE CASCADE,
    document_id     bigint NOT NULL REFERENCES folio.documents (id) ON DELETE CASCADE,
    model_key       text NOT NULL,
    page            integer NOT NULL CHECK (page >= 1),          -- 1-based
    label           text NOT NULL,
    confidence      real NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
    scores          jsonb NOT NULL DEFAULT '{}',
    engine_path     text NOT NULL CHECK (engine_path IN ('vision', 'ocr+lm', 'ocr+rules')),
    -- where the text tiers' text came from: the PDF's own text layer, OCR,
    -- or none (vision answered without it)
    text_source     text NOT NULL CHECK (text_source IN ('pdf', 'ocr', 'none')),
    fallback_reason text,
    PRIMARY KEY (result_id, page)
);
CREATE INDEX page_results_document ON folio.page_results (document_id, model_key);

CREATE TABLE folio.document_segments (
    result_id       bigint NOT NULL REFERENCES folio.results (id) ON DELETE CASCADE,
    document_id     bigint NOT NULL REFERENCES folio.documents (id) ON DELETE CASCADE,
    model_key       text NOT NULL,
    first_page      integer NOT NULL CHECK (first_page >= 1),
    last_page       integer NOT NULL,
    label           text NOT NULL,
    confidence      real NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
    needs_review    boolean NOT NULL DEFAULT true,
    PRIMARY KEY (result_id, first_page),
    CHECK (last_page >= first_page)
);
CREATE INDEX document_segments_document ON folio.document_segments (document_id, model_key);

CREATE FUNCTION folio.results_expand_pages() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO folio.page_results (result_id, document_id, model_key, page, label, confidence, scores,
                                    engine_path, text_source, fallback_reason)
    SELECT NEW.id, NEW.document_id, NEW.model_key, (p->>'page')::int, p->>'label',
           (p->>'confidence')::real, coalesce(p->'scores', '{}'::jsonb), p->>'engine_path',
           p->>'text_source', p->>'fallback_reason'
      FROM jsonb_array_elements(NEW.ocr_pages->'results') AS p;
    IF jsonb_typeof(NEW.ocr_pages->'segments') = 'array' THEN
        INSERT INTO folio.document_segments (result_id, document_id, model_key, first_page, last_page,
                                             label, confidence)
        SELECT NEW.id, NEW.document_id, NEW.model_key, (s->>'first_page')::int, (s->>'last_page')::int,
               s->>'label', (s->>'confidence')::real
          FROM jsonb_array_elements(NEW.ocr_pages->'segments') AS s;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER results_expand_pages AFTER INSERT ON folio.results
    FOR EACH ROW WHEN (jsonb_typeof(NEW.ocr_pages->'results') = 'array')
    EXECUTE FUNCTION folio.results_expand_pages();

-- Documents with more than one suggested segment, one row per segment.
CREATE VIEW folio.split_suggestions AS
SELECT s.document_id,
       (SELECT src.name_display FROM folio.document_sources src
         WHERE src.document_id = s.document_id ORDER BY src.id LIMIT 1) AS name,
       d.pages, s.model_key, s.first_page, s.last_page, s.label, s.confidence, s.needs_review
  FROM folio.document_segments s
  JOIN folio.documents d ON d.id = s.document_id;

DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'folio_worker') THEN
    GRANT SELECT, INSERT ON folio.page_results, folio.document_segments TO folio_worker;
  END IF;
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'folio_reader') THEN
    GRANT SELECT ON folio.page_results, folio.document_segments, folio.split_suggestions TO folio_reader;
  END IF;
END $$;
