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

-- ------------------------------------------------------- the default taxonomy
-- A practical default for a business inbox (engine/labelset.c,
-- ENGINE_DEFAULT_LABELS; pg_test_learn checks they agree) instead of the 16
-- RVL-CDIP research classes, under which a receipt became an invoice at
-- once. Only a database that has never been used gets it: folio.labels
-- still exactly the seeded 16, all active, and no document yet. An
-- installed set is left alone; RVL-CDIP stays available as a named set
-- (`folio labels import --replace rvl-cdip`, and `folio labels import
-- --replace business` switches an existing install by hand).
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM folio.documents)
     AND NOT EXISTS (SELECT 1 FROM folio.labels WHERE NOT active)
     AND (SELECT array_agg(name ORDER BY name) FROM folio.labels) =
         ARRAY['advertisement', 'budget', 'email', 'file folder', 'form', 'handwritten', 'invoice', 'letter', 'memo', 'news article', 'presentation', 'questionnaire', 'resume', 'scientific publication', 'scientific report', 'specification']::text[]
  THEN
    DELETE FROM folio.labels;
    INSERT INTO folio.labels (name, description, keywords) VALUES
 ('receipt', 'A till or card receipt for a purchase already paid',
   '{"receipt^3","till^2","cashier^3","cash^2","change^1.5","register^1","change due^4","card payment^2","visa^1","mastercard^2","contactless^3","thank you for shopping^4","store^1","items^1","total paid^3","amount tendered^4","auth code^3","vat receipt^3"}'),
 ('invoice', 'An invoice or bill asking for payment',
   '{"invoice^2","invoice number^2","invoice no^2","invoice date^2","amount due^3","balance due^3","total due^3","bill to^3","remit to^3","please remit^3","payment terms^2","due date^2","subtotal^2","unit price^2","qty^2","net 30^2","vat^1","tax^0.5"}'),
 ('purchase order', 'An order placed with a supplier',
   '{"purchase order^4","po number^4","p.o.^3","order number^1","ship to^2","vendor^2","supplier^1","delivery date^2","requested by^2","authorised by^2","authorized by^2","please supply^3","order date^2","qty^1","unit price^1"}'),
 ('delivery note', 'A delivery or packing note that goes with goods',
   '{"delivery note^4","packing slip^4","packing list^4","goods received^3","delivered to^3","received by^3","received in good condition^4","consignment^3","carrier^2","parcels^2","dispatch^2","dispatched^2","shipment^1","qty delivered^3"}'),
 ('contract', 'A contract or agreement with terms and signatures',
   '{"contract^2","agreement^1","this agreement^3","the parties^3","hereinafter^4","whereas^3","terms and conditions^2","shall^1","clause^2","termination^2","governing law^4","in witness whereof^4","effective date^2","obligations^2","signed by^1","party^1"}'),
 ('bank statement', 'A bank account statement with balances and transactions',
   '{"bank statement^4","statement of account^4","account number^2","sort code^4","iban^3","opening balance^4","closing balance^4","balance brought forward^4","balance carried forward^4","direct debit^3","standing order^3","withdrawal^2","deposit^1","overdraft^2","transactions^1","statement period^3"}'),
 ('payslip', 'A pay slip or earnings statement for an employee',
   '{"payslip^4","pay slip^4","pay stub^4","earnings statement^4","gross pay^4","net pay^4","pay period^3","pay date^2","national insurance^3","income tax^2","deductions^2","ytd^2","year to date^1","employee id^2","hourly rate^2","overtime^2","paye^3"}'),
 ('tax form', 'A tax return or official tax form',
   '{"tax return^4","tax year^3","taxpayer^3","form w-2^4","w-2^3","1099^3","self assessment^4","hmrc^3","irs^3","internal revenue^3","taxable income^3","tax identification^3","employer identification number^3","ssn^1","filing status^4","schedule^1"}'),
 ('letter', 'A business or personal letter with salutation and signature',
   '{"letter^0.5","dear^2","sincerely^3","yours sincerely^2","yours truly^3","yours faithfully^3","kind regards^2","best regards^2","warm regards^2","respectfully^2","enclosure^2","enclosures^2","encl^2","thank you for your letter^3","look forward to^1","do not hesitate^2","we are pleased to^1"}'),
 ('email', 'A printed e-mail message with headers',
   '{"email^0.5","e-mail^0.5","original message^4","forwarded message^4","sent:^3","wrote:^3","fwd:^3","fw:^2","re:^0.5","cc:^0.5","bcc:^2","subject:^0.5","attachments:^3","attachment:^2","importance:^3","reply^1"}'),
 ('form', 'A form with fields, boxes or blanks to fill in',
   '{"form^1","please print^3","office use only^4","for office use^3","applicant^2","signature of^2","check one^3","check all that apply^3","mm/dd/yyyy^3","date of birth^2","block letters^3","complete this form^3","fill in^2","tick the box^2","return this form^3"}'),
 ('resume', 'A CV or resume of a person''s work and education',
   '{"resume^3","curriculum vitae^4","work experience^3","professional experience^3","employment history^3","education^2","skills^2","references available^3","objective:^2","bachelor of^2","master of^1","gpa^2","proficient in^2","languages:^1","certifications^2"}'),
 ('report', 'A report: findings, analysis and recommendations',
   '{"report^1","executive summary^3","findings^2","recommendations^2","conclusions^2","methodology^2","analysis^1","introduction^1","appendix^2","key findings^3","background^1","scope^1","results^1","table of contents^2"}'),
 ('memo', 'An internal memorandum',
   '{"memo^3","memorandum^4","interoffice^3","inter-office^3","internal memo^2","distribution:^2","copies to^2","from:^0.5","to:^0.5","subject:^0.5","re:^1","cc:^0.5"}');
  END IF;
END $$;
