-- folio schema, version 15 (issue 33): a document's own correction is its
-- result. `folio reclassify` used to let a new model overwrite what a
-- person had said: corrected letters, a CV and a receipt came back as
-- `invoice` at 0.89-0.996, not flagged. Now every result written for a
-- document with a whole-document correction (the newest one wins, as in
-- training and eval) carries the correction as its label, with confidence
-- 1 and no review (also when the engine agreed); the engine's own answer is kept beside it in
-- engine_label (NULL when the engine agreed), so both are shown and
-- `folio eval` can still score the engine. A trigger rather than worker
-- code, so every writer (folio.complete_job behind a pooler, the direct
-- statement, plain SQL) keeps to it.
ALTER TABLE folio.results ADD COLUMN engine_label text;
ALTER TABLE folio.results_history ADD COLUMN engine_label text;

CREATE FUNCTION folio.results_keep_correction() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  said text;
BEGIN
  SELECT c.label INTO said FROM folio.corrections c
   WHERE c.document_id = NEW.document_id AND c.page IS NULL ORDER BY c.id DESC LIMIT 1;
  IF said IS NOT NULL THEN
    IF said IS DISTINCT FROM NEW.label THEN
      NEW.engine_label := coalesce(NEW.engine_label, NEW.label);
      NEW.label := said;
    END IF;
    -- a person said what it is: nothing left to review
    NEW.confidence := 1;
    NEW.needs_review := false;
    NEW.review_reason := NULL;
  END IF;
  RETURN NEW;
END $$;

CREATE TRIGGER results_keep_correction BEFORE INSERT ON folio.results
    FOR EACH ROW EXECUTE FUNCTION folio.results_keep_correction();

-- result_versions shows the engine's answer beside the label.
CREATE OR REPLACE VIEW folio.result_versions AS
SELECT document_id, model_key, label, confidence, needs_review, engine_path, created_at,
       NULL::timestamptz AS replaced_at, true AS current, engine_label
  FROM folio.results
UNION ALL
SELECT document_id, model_key, label, confidence, needs_review, engine_path, created_at,
       replaced_at, false, engine_label
  FROM folio.results_history;
