-- folio schema, version 5 (issue 16): keywords that mean something, a review
-- policy every worker shares, corrections as data, and the learned tier's
-- models.
--
-- Default taxonomy: the keywords of engine/labelset.c (ENGINE_DEFAULT_LABELS,
-- also what `folio classify` uses without --labels; the pg test
-- pg_test_learn checks they agree). Words that occur on most English pages
-- are gone, phrases carry weights ("amount due^3"). Only labels that still
-- hold the schema-001 seed keywords are updated: a user's edits are kept.
UPDATE folio.labels SET keywords = '{"letter^0.5","dear^2","sincerely^3","yours sincerely^2","yours truly^3","yours faithfully^3","kind regards^2","best regards^2","warm regards^2","respectfully^2","enclosure^2","enclosures^2","encl^2","thank you for your letter^3","look forward to^1","do not hesitate^2","we are pleased to^1"}'
 WHERE name = 'letter' AND keywords = '{"dear","sincerely","regards","yours truly","enclosure","letterhead"}'::text[];
UPDATE folio.labels SET keywords = '{"form^1","please print^3","office use only^4","for office use^3","applicant^2","signature of^2","check one^3","check all that apply^3","mm/dd/yyyy^3","date of birth^2","block letters^3","complete this form^3","fill in^2","tick the box^2","return this form^3","social security number^2"}'
 WHERE name = 'form' AND keywords = '{"please print","signature","date","checkbox","fill in","office use only","applicant"}'::text[];
UPDATE folio.labels SET keywords = '{"email^0.5","e-mail^0.5","original message^4","forwarded message^4","sent:^3","wrote:^3","fwd:^3","fw:^2","re:^0.5","cc:^0.5","bcc:^2","subject:^0.5","attachments:^3","attachment:^2","importance:^3","reply^1"}'
 WHERE name = 'email' AND keywords = '{"from","to","subject","sent","cc","original message","@"}'::text[];
UPDATE folio.labels SET keywords = '{"handwritten^2","handwriting^2"}'
 WHERE name = 'handwritten' AND keywords = '{"handwritten","note","notes"}'::text[];
UPDATE folio.labels SET keywords = '{"advertisement^2","call now^3","order now^3","limited time^3","special offer^3","act now^3","while supplies last^4","save up to^3","% off^3","introducing^2","guaranteed^2","sale^1","discount^2","coupon^3","visit our showroom^3","free trial^3","buy one^3"}'
 WHERE name = 'advertisement' AND keywords = '{"sale","offer","free","buy","discount","call now","limited","new"}'::text[];
UPDATE folio.labels SET keywords = '{"report^0.5","technical report^3","test report^3","methods^2","methodology^2","materials and methods^3","experimental^2","procedure^1","conclusions^2","findings^2","laboratory^2","samples^1","test results^2","results and discussion^3","executive summary^1","recommendations^1"}'
 WHERE name = 'scientific report' AND keywords = '{"report","study","results","methods","conclusion","data","analysis","test"}'::text[];
UPDATE folio.labels SET keywords = '{"abstract^3","doi^3","et al^3","journal of^2","proceedings^2","keywords:^2","received^1","accepted for publication^3","issn^3","introduction^1","references^1","vol.^1","pp.^2","corresponding author^3","in press^2","literature^1"}'
 WHERE name = 'scientific publication' AND keywords = '{"abstract","introduction","references","journal","doi","et al","university","vol"}'::text[];
UPDATE folio.labels SET keywords = '{"specification^3","specifications^3","tolerance^3","datasheet^3","data sheet^3","dimensions^2","nominal^2","operating temperature^3","part number^2","conforms to^2","astm^2","rated voltage^3","parameter^1","max.^1","min.^1","shall be^1","requirements^1"}'
 WHERE name = 'specification' AND keywords = '{"specification","specifications","tolerance","dimensions","requirements","standard","parameter","datasheet"}'::text[];
UPDATE folio.labels SET keywords = '{"file folder^3","folder^2","file no^2","file number^2","tab^1"}'
 WHERE name = 'file folder' AND keywords = '{"file","folder","index","tab"}'::text[];
UPDATE folio.labels SET keywords = '{"news^1","reported^1","according to^1","spokesman^3","spokeswoman^3","spokesperson^3","told reporters^3","staff writer^4","associated press^4","reuters^3","correspondent^2","officials said^3","press release^1","yesterday^1","said^0.5"}'
 WHERE name = 'news article' AND keywords = '{"news","reported","said","according","press","times","daily","journal"}'::text[];
UPDATE folio.labels SET keywords = '{"budget^3","budgeted^3","fiscal year^3","forecast^2","variance^3","expenditures^2","expenditure^2","allocation^2","line item^3","year to date^2","projected^1","actual^1","personnel costs^2","total costs^2","revenue^1","overhead^1"}'
 WHERE name = 'budget' AND keywords = '{"budget","total","costs","expenses","fiscal","forecast","allocation","revenue"}'::text[];
UPDATE folio.labels SET keywords = '{"invoice^3","invoice number^2","invoice no^2","invoice date^2","amount due^3","balance due^3","total due^3","bill to^3","remit to^3","please remit^3","payment terms^2","due date^2","subtotal^2","unit price^2","qty^2","net 30^2","vat^1","tax^0.5"}'
 WHERE name = 'invoice' AND keywords = '{"invoice","invoice number","amount due","payment","bill to","total","tax","due","remit"}'::text[];
UPDATE folio.labels SET keywords = '{"presentation^2","slide^2","agenda^2","overview^1","objectives^1","key points^2","next steps^2","questions?^2","discussion points^2"}'
 WHERE name = 'presentation' AND keywords = '{"presentation","slide","agenda","overview","objectives","summary"}'::text[];
UPDATE folio.labels SET keywords = '{"questionnaire^4","survey^3","respondent^3","strongly agree^4","strongly disagree^4","agree^1","disagree^1","please circle^3","please tick^3","how satisfied^3","on a scale of^3","how often^2","question^1","questions^1","comments:^1"}'
 WHERE name = 'questionnaire' AND keywords = '{"questionnaire","survey","question","questions","answer","respondent","agree","disagree"}'::text[];
UPDATE folio.labels SET keywords = '{"resume^3","curriculum vitae^4","work experience^3","professional experience^3","employment history^3","education^2","skills^2","references available^3","objective:^2","bachelor of^2","master of^1","gpa^2","proficient in^2","languages:^1","certifications^2"}'
 WHERE name = 'resume' AND keywords = '{"resume","curriculum vitae","education","experience","employment","skills","references"}'::text[];
UPDATE folio.labels SET keywords = '{"memo^3","memorandum^4","interoffice^3","inter-office^3","internal memo^2","distribution:^2","copies to^2","from:^0.5","to:^0.5","subject:^0.5","re:^1","cc:^0.5"}'
 WHERE name = 'memo' AND keywords = '{"memo","memorandum","to","from","subject","date","re","cc"}'::text[];

-- ocr+learned sits between ocr+lm and ocr+rules.
ALTER TABLE folio.results DROP CONSTRAINT results_engine_path_check;
ALTER TABLE folio.results ADD CONSTRAINT results_engine_path_check
    CHECK (engine_path IN ('vision', 'ocr+lm', 'ocr+learned', 'ocr+rules'));

-- Review policy per model key, read by every worker at label refresh, so a
-- fleet flags the same results (a worker's --review-below overrides it).
-- A result needs review when its probability is under review_below or its
-- lead over the second label is under review_margin; ties always do.
-- Why a result needs review ("tie between memo and email", "probability
-- 0.41 < 0.50"); NULL when it does not.
ALTER TABLE folio.results ADD COLUMN review_reason text;

CREATE TABLE folio.review_policy (
    model_key     text PRIMARY KEY,
    review_below  real NOT NULL CHECK (review_below >= 0 AND review_below <= 1),
    review_margin real NOT NULL DEFAULT 0.1 CHECK (review_margin >= 0 AND review_margin <= 1),
    updated_at    timestamptz NOT NULL DEFAULT now()
);

-- A person's word on what a document (or one page of it) is. Written by
-- `folio correct DOC LABEL` or plain SQL; the newest row per document wins.
-- The label must exist (renames follow it).
CREATE TABLE folio.corrections (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    document_id  bigint NOT NULL REFERENCES folio.documents (id) ON DELETE CASCADE,
    page         integer CHECK (page >= 1),            -- NULL = the whole document
    label        text NOT NULL REFERENCES folio.labels (name) ON UPDATE CASCADE,
    corrected_by text NOT NULL DEFAULT current_user,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX corrections_document ON folio.corrections (document_id, id);

-- Trained ocr+learned models (engine/learned.c blobs); workers load the
-- newest for their model key. corrections_upto is the highest corrections.id
-- it saw, so "enough new corrections to retrain" is one comparison.
CREATE TABLE folio.learned_models (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    model_key        text NOT NULL DEFAULT 'default',
    examples         integer NOT NULL CHECK (examples > 0),
    per_label        jsonb NOT NULL,                   -- label -> examples used
    corrections_upto bigint NOT NULL DEFAULT 0,
    model            bytea NOT NULL,
    trained_by       text NOT NULL DEFAULT current_user,
    created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX learned_models_key ON folio.learned_models (model_key, id DESC);

-- Reclassification keeps history: `folio reclassify` moves the current
-- result of each chosen document into results_history and re-queues its job
-- in the same transaction, so the next worker writes a new current result
-- (results stays one row per document and model key, the queue's
-- exactly-once key). result_versions shows both, newest first.
CREATE TABLE folio.results_history (
    id              bigint PRIMARY KEY,                -- the results.id it had
    document_id     bigint NOT NULL REFERENCES folio.documents (id) ON DELETE CASCADE,
    model_key       text NOT NULL,
    label           text NOT NULL,
    confidence      real NOT NULL,
    needs_review    boolean NOT NULL,
    scores          jsonb NOT NULL,
    engine_path     text NOT NULL,
    fallback_reason text,
    ocr_text        text,
    ocr_confidence  real,
    ocr_orientation smallint,
    review_reason   text,
    timings         jsonb NOT NULL,
    worker_id       bigint,
    job_id          bigint,
    attempt         integer,
    created_at      timestamptz NOT NULL,
    replaced_at     timestamptz NOT NULL DEFAULT now(),
    replaced_by     text NOT NULL DEFAULT current_user
);
CREATE INDEX results_history_document ON folio.results_history (document_id, model_key, id);

CREATE VIEW folio.result_versions AS
SELECT document_id, model_key, label, confidence, needs_review, engine_path, created_at,
       NULL::timestamptz AS replaced_at, true AS current
  FROM folio.results
UNION ALL
SELECT document_id, model_key, label, confidence, needs_review, engine_path, created_at,
       replaced_at, false
  FROM folio.results_history;

DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'folio_worker') THEN
    GRANT SELECT ON folio.review_policy, folio.corrections TO folio_worker;
    -- workers retrain automatically when enough corrections arrive
    GRANT SELECT, INSERT ON folio.learned_models TO folio_worker;
  END IF;
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'folio_reader') THEN
    GRANT SELECT ON folio.review_policy, folio.corrections, folio.learned_models,
                    folio.results_history, folio.result_versions TO folio_reader;
  END IF;
END $$;
