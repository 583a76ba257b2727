-- folio schema, version 10: `folio reclassify --reuse-ocr` (issue 16).
--
-- A re-queued job may name the old result (now in results_history) whose
-- text its worker takes instead of reading the pages again: Tesseract is
-- the slow part of the text tiers, and a new taxonomy, new keywords or a
-- new ocr+learned model does not change what the pages say. The worker
-- looks the text up only when a text tier asks for a page's text, so jobs
-- without it cost nothing more, and a page whose text was never stored
-- (the vision tier answered it) is read as usual.
ALTER TABLE folio.jobs ADD COLUMN reuse_text_from bigint
    REFERENCES folio.results_history (id) ON DELETE SET NULL;

-- Which page's text came from where (results.ocr_pages: "results"[i]
-- .text_source), kept with the old result, so reused text keeps its source
-- in page_results, and history keeps the page counts it had.
ALTER TABLE folio.results_history ADD COLUMN ocr_pages jsonb;

DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'folio_worker') THEN
    GRANT SELECT (id, ocr_text, ocr_confidence, ocr_orientation, ocr_pages) ON folio.results_history
      TO folio_worker;
  END IF;
END $$;
