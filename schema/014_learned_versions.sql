-- folio schema, version 14 (issue 33): learned models are versions with a
-- guard. Until now workers loaded the newest model of their key, so a
-- retrain on new corrections (by `folio train` or a worker on its own after
-- --retrain-after corrections) went live whatever it did; a four-label model
-- moved corrected letters and a CV to `invoice` and eval fell from 1.000 to
-- 0.833. Now exactly one model per key is active, and a new one becomes
-- active only when, on the held-out corrections (learn_db.c: the same
-- deterministic fifth of the corrected documents, which no model trains
-- on), the chain with it is no worse than with the active one in accuracy
-- and in precision above the review threshold. Otherwise it is kept,
-- inactive, with the comparison.
ALTER TABLE folio.learned_models
    ADD COLUMN active     boolean NOT NULL DEFAULT false,
    ADD COLUMN trained_on integer,        -- examples it learned from (examples: all it was given)
    ADD COLUMN held_out   jsonb,          -- its scores on the held-out corrections, and the active one's
    ADD COLUMN comparison text;           -- why it is active or not, in words

-- The newest model of each key was the one in use: it stays in use.
UPDATE folio.learned_models m SET active = true, comparison = 'in use before schema 14 (newest of its key)'
 WHERE m.id = (SELECT max(x.id) FROM folio.learned_models x WHERE x.model_key = m.model_key);
CREATE UNIQUE INDEX learned_models_one_active ON folio.learned_models (model_key) WHERE active;

-- A worker's automatic retrain stores its model and, when the guard lets
-- it, switches the active one (the columns it writes; 008's pattern).
DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'folio_worker') THEN
    GRANT UPDATE (active) ON folio.learned_models TO folio_worker;
  END IF;
END $$;
