-- Per-page results (004) may come from the ocr+learned tier (005) too:
-- 004 and 005 were written side by side, and 004's check predates the
-- learned tier, so a learned page answer was refused and its job retried
-- to death (found when both landed; pg_test_reclassify).
ALTER TABLE folio.page_results DROP CONSTRAINT page_results_engine_path_check;
ALTER TABLE folio.page_results ADD CONSTRAINT page_results_engine_path_check
    CHECK (engine_path IN ('vision', 'ocr+lm', 'ocr+learned', 'ocr+rules'));
