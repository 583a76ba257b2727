/*
 * Label files and the default taxonomy (see engine.h for the format).
 *
 * One format for every place a label set is written by hand — `classify
 * --labels`, `folio labels import/export`, and the defaults below, which
 * schema/005 seeds into folio.labels (a pg test checks the two agree) — so
 * a file that works with `folio classify` works in SQL too. The parser is
 * strict: a line without a colon used to become a label named after the
 * whole line; now it is an error naming the line.
 *
 * The default keywords (issue 16): no word that occurs on most English
 * pages ("to", "from", "date", "new", "free", "data", "@"); phrases that
 * only one kind of document uses, weighted by how sure they make a reader;
 * header words shared by memos and e-mails ("subject:") weigh little, the
 * words that tell them apart ("memorandum", "original message", "sent:")
 * weigh most. Words ending in ':' only count as headers: "sent:" does not
 * fire on "we sent the parts".
 */
#include "engine/labels_internal.h"

#include <stdlib.h>
#include <string.h>

/* One literal, as the label file format reads it, longer than the 4095
 * characters C99 promises every compiler: gcc and clang take it whole. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverlength-strings"
const char ENGINE_DEFAULT_LABELS[] =
    "# folio default taxonomy: a business inbox. name (description): keyword, \"phrase\", weighted^3\n"
    "receipt (A till or card receipt for a purchase already paid): receipt^3, till^2, cashier^3, cash^2,"
    " change^1.5, register^1, change due^4, card payment^2, visa^1, mastercard^2, contactless^3,"
    " thank you for shopping^4, store^1, items^1, total paid^3, amount tendered^4, auth code^3,"
    " vat receipt^3, till receipt^4, pin verified^3, cash tendered^4, change given^4, customer copy^3,"
    " proof of purchase^3, loyalty points^3, apple pay^3, amex^2\n"
    "invoice (An invoice or bill asking for payment): invoice^2, invoice number^2, invoice no^2,"
    " invoice date^2, amount due^3, balance due^3, total due^3, bill to^3, remit to^3, please remit^3,"
    " payment terms^2, due date^2, subtotal^2, unit price^2, qty^2, net 30^2, vat^1, tax^0.5, tax invoice^3, sales invoice^3, invoice total^3,"
    " total payable^2, amount owing^3, overdue^2\n"
    "purchase order (An order placed with a supplier): purchase order^4, po number^4, p.o.^3,"
    " order number^1, ship to^2, vendor^2, supplier^1, delivery date^2, requested by^2, authorised by^2,"
    " authorized by^2, please supply^3, order date^2, qty^1, unit price^1, official order^4, date raised^3, raised by^2,"
    " required by^2, cost centre^3, cost center^3, procurement^2, purchasing^2, order value^3, order no^2\n"
    "delivery note (A delivery or packing note that goes with goods): delivery note^4, packing slip^4,"
    " packing list^4, goods received^3, delivered to^3, received by^3, received in good condition^4,"
    " consignment^3, carrier^2, parcels^2, dispatch^2, dispatched^2, shipment^1, qty delivered^3, despatch note^4, despatch^3, despatched^3,"
    " proof of delivery^4, number of packages^3, packages^1, tracking^2, shortages^3, discrepancy^2,"
    " customer signature^2, consignee^3\n"
    "contract (A contract or agreement with terms and signatures): contract^2, agreement^1,"
    " this agreement^3, the parties^3, hereinafter^4, whereas^3, terms and conditions^2, shall^1,"
    " clause^2, termination^2, governing law^4, in witness whereof^4, effective date^2, obligations^2,"
    " signed by^1, party^1\n"
    "bank statement (A bank account statement with balances and transactions): bank statement^4,"
    " statement of account^4, account number^2, sort code^4, iban^3, opening balance^4, closing balance^4,"
    " balance brought forward^4, balance carried forward^4, direct debit^3, standing order^3,"
    " withdrawal^2, deposit^1, overdraft^2, transactions^1, statement period^3, money out^4, money in^4, paid out^3,"
    /* not "paid in": it is in "paid in full", an invoice's terms (test_pdf_pages) */
    " start balance^4, end balance^4, current account^3, savings account^3, statement no^3,"
    " overdrawn^3, compensation scheme^2\n"
    "payslip (A pay slip or earnings statement for an employee): payslip^4, pay slip^4, pay stub^4,"
    " earnings statement^4, gross pay^4, net pay^4, pay period^3, pay date^2, national insurance^3,"
    " income tax^2, deductions^2, ytd^2, year to date^1, employee id^2, hourly rate^2, overtime^2, paye^3, salary advice^4, pay statement^4,"
    " statement of earnings^4, wage slip^4, net payment^3, total deductions^3, taxable pay^3, tax code^2\n"
    "tax form (A tax return or official tax form): tax return^4, tax year^3, taxpayer^3, form w-2^4,"
    " w-2^3, 1099^3, self assessment^4, hmrc^3, irs^3, internal revenue^3, taxable income^3,"
    " tax identification^3, employer identification number^3, ssn^1, filing status^4, schedule^1, vat return^4, vat due^3, unique taxpayer reference^4,"
    " utr^3, adjusted gross income^4, standard deduction^4, under penalties of perjury^4,"
    " wage and tax statement^4, form 1040^4, allowable expenses^3, gift aid^3, reclaimed^2\n"
    "letter (A business or personal letter with salutation and signature): letter^0.5, dear^2,"
    " sincerely^3, yours sincerely^2, yours truly^3, yours faithfully^3, kind regards^2, best regards^2,"
    " warm regards^2, respectfully^2, enclosure^2, enclosures^2, encl^2, thank you for your letter^3,"
    " look forward to^1, do not hesitate^2, we are pleased to^1, to whom it may concern^4,"
    " our ref^2, with best wishes^2, warm wishes^2, many thanks^1, dear customer^2\n"
    "email (A printed e-mail message with headers): email^0.5, e-mail^0.5, original message^4,"
    " forwarded message^4, sent:^3, wrote:^3, fwd:^3, fw:^2, re:^0.5, cc:^0.5, bcc:^2, subject:^0.5,"
    " attachments:^3, attachment:^2, importance:^3, reply^1, begin forwarded message^4,"
    " this email and any attachments^4, printed by^2\n"
    "form (A form with fields, boxes or blanks to fill in): form^1, please print^3, office use only^4,"
    " for office use^3, applicant^2, signature of^2, check one^3, check all that apply^3, mm/dd/yyyy^3,"
    " date of birth^2, block letters^3, complete this form^3, fill in^2, tick the box^2,"
    " return this form^3, capital letters^3, block capitals^3, surname^2, forename^3, mandatory^2,"
    " tick if^3, please tick^2, office use^3, hr use only^4, request form^3, application form^3,"
    " checklist^2, incomplete forms^3, witness^2\n"
    "resume (A CV or resume of a person's work and education): resume^3, curriculum vitae^4,"
    " work experience^3, professional experience^3, employment history^3, education^2, skills^2,"
    " references available^3, objective:^2, bachelor of^2, master of^1, gpa^2, proficient in^2,"
    " languages:^1, certifications^2, cv^3, career history^4, qualifications^3,"
    " personal statement^4, referees^4, driving licence^3, hobbies^3, interests^2, employment^2\n"
    "report (A report: findings, analysis and recommendations): report^1, executive summary^3, findings^2,"
    " recommendations^2, conclusions^2, methodology^2, analysis^1, introduction^1, appendix^2,"
    " key findings^3, background^1, scope^1, results^1, table of contents^2, prepared by^2, summary^1, purpose^1,"
    " options considered^3, next steps^2, conclusion^2, we recommend^3, data were collected^3, study^1,"
    " review^1\n"
    "memo (An internal memorandum): memo^3, memorandum^4, interoffice^3, inter-office^3, internal memo^2,"
    " distribution:^2, copies to^2, from:^0.5, to:^0.5, subject:^0.5, re:^1, cc:^0.5, staff notice^3, note to staff^4, internal memorandum^4,"
    " all staff^2\n";

#pragma GCC diagnostic pop

const char ENGINE_RVL_CDIP_LABELS[] =
    "# the 16 RVL-CDIP classes\n"
    "letter (A business or personal letter with salutation and signature): letter^0.5, dear^2,"
    " sincerely^3, yours sincerely^2, yours truly^3, yours faithfully^3, kind regards^2, best regards^2,"
    " warm regards^2, respectfully^2, enclosure^2, enclosures^2, encl^2, thank you for your letter^3,"
    " look forward to^1, do not hesitate^2, we are pleased to^1\n"
    "form (A form with fields, boxes or blanks to fill in): form^1, please print^3, office use only^4,"
    " for office use^3, applicant^2, signature of^2, check one^3, check all that apply^3, mm/dd/yyyy^3,"
    " date of birth^2, block letters^3, complete this form^3, fill in^2, tick the box^2,"
    " return this form^3, social security number^2\n"
    "email (A printed e-mail message with headers): email^0.5, e-mail^0.5, original message^4,"
    " forwarded message^4, sent:^3, wrote:^3, fwd:^3, fw:^2, re:^0.5, cc:^0.5, bcc:^2, subject:^0.5,"
    " attachments:^3, attachment:^2, importance:^3, reply^1\n"
    "handwritten (A page written mostly by hand): handwritten^2, handwriting^2\n"
    "advertisement (An advertisement, flyer or promotional page): advertisement^2, call now^3,"
    " order now^3, limited time^3, special offer^3, act now^3, while supplies last^4, save up to^3,"
    " % off^3, introducing^2, guaranteed^2, sale^1, discount^2, coupon^3, visit our showroom^3,"
    " free trial^3, buy one^3\n"
    "scientific report (An internal scientific or technical report): report^0.5, technical report^3,"
    " test report^3, methods^2, methodology^2, materials and methods^3, experimental^2, procedure^1,"
    " conclusions^2, findings^2, laboratory^2, samples^1, test results^2, results and discussion^3,"
    " executive summary^1, recommendations^1\n"
    "scientific publication (A published scientific paper or journal article): abstract^3, doi^3, et al^3,"
    " journal of^2, proceedings^2, keywords:^2, received^1, accepted for publication^3, issn^3,"
    " introduction^1, references^1, vol.^1, pp.^2, corresponding author^3, in press^2, literature^1\n"
    "specification (A product, material or technical specification or datasheet): specification^3,"
    " specifications^3, tolerance^3, datasheet^3, data sheet^3, dimensions^2, nominal^2,"
    " operating temperature^3, part number^2, conforms to^2, astm^2, rated voltage^3, parameter^1, max.^1,"
    " min.^1, shall be^1, requirements^1\n"
    "file folder (A file folder cover or tab): file folder^3, folder^2, file no^2, file number^2, tab^1\n"
    "news article (A newspaper or magazine article): news^1, reported^1, according to^1, spokesman^3,"
    " spokeswoman^3, spokesperson^3, told reporters^3, staff writer^4, associated press^4, reuters^3,"
    " correspondent^2, officials said^3, press release^1, yesterday^1, said^0.5\n"
    "budget (A budget, financial plan or cost table): budget^3, budgeted^3, fiscal year^3, forecast^2,"
    " variance^3, expenditures^2, expenditure^2, allocation^2, line item^3, year to date^2, projected^1,"
    " actual^1, personnel costs^2, total costs^2, revenue^1, overhead^1\n"
    "invoice (An invoice, bill or statement requesting payment): invoice^3, invoice number^2,"
    " invoice no^2, invoice date^2, amount due^3, balance due^3, total due^3, bill to^3, remit to^3,"
    " please remit^3, payment terms^2, due date^2, subtotal^2, unit price^2, qty^2, net 30^2, vat^1,"
    " tax^0.5\n"
    "presentation (A presentation slide or overhead): presentation^2, slide^2, agenda^2, overview^1,"
    " objectives^1, key points^2, next steps^2, questions?^2, discussion points^2\n"
    "questionnaire (A survey or questionnaire with questions to answer): questionnaire^4, survey^3,"
    " respondent^3, strongly agree^4, strongly disagree^4, agree^1, disagree^1, please circle^3,"
    " please tick^3, how satisfied^3, on a scale of^3, how often^2, question^1, questions^1, comments:^1\n"
    "resume (A resume or curriculum vitae): resume^3, curriculum vitae^4, work experience^3,"
    " professional experience^3, employment history^3, education^2, skills^2, references available^3,"
    " objective:^2, bachelor of^2, master of^1, gpa^2, proficient in^2, languages:^1, certifications^2\n"
    "memo (An internal memorandum): memo^3, memorandum^4, interoffice^3, inter-office^3, internal memo^2,"
    " distribution:^2, copies to^2, from:^0.5, to:^0.5, subject:^0.5, re:^1, cc:^0.5\n";

/* ------------------------------------------------------------ the set */

struct engine_labels *engine_labels_new(void) { return calloc(1, sizeof(struct engine_labels)); }

void engine_labels_free(struct engine_labels *l)
{
    if (!l)
        return;
    for (int i = 0; i < l->n; i++) {
        free(l->v[i].name);
        free(l->v[i].description);
        for (int k = 0; k < l->v[i].n_terms; k++)
            free(l->v[i].terms[k]);
        free(l->v[i].terms);
        free(l->v[i].weights);
    }
    free(l->v);
    free(l->names);
    free(l);
}

int engine_is_word_byte(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c >= 0x80;
}

static int is_space_byte(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* Lower-cases ASCII and folds whitespace runs to one space, trimmed. */
char *engine_text_normalise(const char *s)
{
    size_t n = strlen(s);
    char *out = malloc(n + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    int pending_space = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (is_space_byte(c)) {
            pending_space = o > 0;
            continue;
        }
        if (pending_space)
            out[o++] = ' ';
        pending_space = 0;
        out[o++] = (char)((c >= 'A' && c <= 'Z') ? c + 32 : c);
    }
    out[o] = '\0';
    return out;
}

int engine_labels_add(struct engine_labels *l, const char *name, const char *const *keywords,
                      int n_keywords, struct folio_err *err)
{
    if (!name || !name[0] || strlen(name) > ENGINE_LABEL_MAX)
        return folio_err_set(err, FOLIO_EINVAL, "label name '%s' must be 1..%d bytes", name ? name : "",
                             ENGINE_LABEL_MAX);
    if (strcmp(name, ENGINE_UNKNOWN_LABEL) == 0)
        return folio_err_set(err, FOLIO_EINVAL, "'%s' is reserved for documents no label matched",
                             ENGINE_UNKNOWN_LABEL);
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 16;
        struct engine_label_def *v = realloc(l->v, (size_t)cap * sizeof *v);
        if (!v)
            return folio_err_set(err, FOLIO_ENOMEM, "cannot grow the label set to %d", cap);
        l->v = v;
        const char **nm = realloc(l->names, (size_t)cap * sizeof *nm);
        if (!nm)
            return folio_err_set(err, FOLIO_ENOMEM, "cannot grow the label set to %d", cap);
        l->names = nm;
        l->cap = cap;
    }
    struct engine_label_def d = {0};
    d.name = strdup(name);
    d.name_weight = ENGINE_NAME_WEIGHT;
    d.terms = calloc((size_t)(n_keywords > 0 ? n_keywords : 1), sizeof *d.terms);
    d.weights = calloc((size_t)(n_keywords > 0 ? n_keywords : 1), sizeof *d.weights);
    char *nm = engine_text_normalise(name);
    if (!d.name || !d.terms || !d.weights || !nm)
        goto oom;
    for (int k = 0; k < n_keywords; k++) {
        if (!keywords[k])
            continue;
        double w = 1;
        char *t = engine_text_normalise(keywords[k]);
        if (!t)
            goto oom;
        if (engine_keyword_split(t, &w)) {
            free(t);
            free(nm);
            free(d.name);
            for (int j = 0; j < d.n_terms; j++)
                free(d.terms[j]);
            free(d.terms);
            free(d.weights);
            folio_err_set(err, FOLIO_EINVAL, "label '%s': keyword '%s' has a bad weight", name, keywords[k]);
            folio_err_hint(err, "write a weight as keyword^N with N a number in 0..%g, e.g. \"amount due^3\"",
                           ENGINE_KEYWORD_WEIGHT_MAX);
            return FOLIO_EINVAL;
        }
        if (!t[0]) {
            free(t);
            continue;
        }
        if (strcmp(t, nm) == 0) {
            d.name_weight = w; /* the name listed as a keyword: its weight, counted once */
            free(t);
            continue;
        }
        d.weights[d.n_terms] = w;
        d.terms[d.n_terms++] = t;
    }
    free(nm);
    nm = NULL;
    l->v[l->n] = d;
    l->names[l->n] = d.name;
    l->n++;
    return 0;
oom:
    free(nm);
    free(d.name);
    if (d.terms)
        for (int k = 0; k < d.n_terms; k++)
            free(d.terms[k]);
    free(d.terms);
    free(d.weights);
    return folio_err_set(err, FOLIO_ENOMEM, "cannot store label '%s'", name);
}

int engine_keyword_split(char *kw, double *weight)
{
    *weight = 1;
    char *caret = strrchr(kw, '^');
    if (!caret)
        return 0;
    char *end = NULL;
    double w = strtod(caret + 1, &end);
    if (end == caret + 1 || *end || !(w >= 0 && w <= ENGINE_KEYWORD_WEIGHT_MAX))
        return FOLIO_EINVAL;
    *weight = w;
    /* "amount due ^3": the space before the caret is not part of the term */
    while (caret > kw && caret[-1] == ' ')
        caret--;
    *caret = '\0';
    return 0;
}

int engine_labels_count(const struct engine_labels *l) { return l ? l->n : 0; }

int engine_labels_set_description(struct engine_labels *l, int i, const char *description, struct folio_err *err)
{
    if (!l || i < 0 || i >= l->n)
        return folio_err_set(err, FOLIO_EINVAL, "no label %d to describe", i);
    char *d = strdup(description ? description : "");
    if (!d)
        return folio_err_set(err, FOLIO_ENOMEM, "cannot store the description of '%s'", l->v[i].name);
    free(l->v[i].description);
    l->v[i].description = d;
    return 0;
}

const char *engine_labels_description(const struct engine_labels *l, int i)
{
    return (l && i >= 0 && i < l->n && l->v[i].description) ? l->v[i].description : "";
}

const char *engine_labels_name(const struct engine_labels *l, int i)
{
    return (l && i >= 0 && i < l->n) ? l->v[i].name : NULL;
}

int engine_labels_keyword(const struct engine_labels *l, int i, int k, char *buf, size_t n)
{
    if (!l || i < 0 || i >= l->n)
        return FOLIO_EINVAL;
    const struct engine_label_def *d = &l->v[i];
    /* the name, when given a weight of its own, is exported as keyword 0 */
    int named = d->name_weight != ENGINE_NAME_WEIGHT;
    if (named && k == 0)
        return folio_snprintf(buf, n, "%s^%g", d->name, d->name_weight);
    k -= named;
    if (k < 0 || k >= d->n_terms)
        return FOLIO_EINVAL;
    if (d->weights[k] == 1)
        return folio_snprintf(buf, n, "%s", d->terms[k]);
    return folio_snprintf(buf, n, "%s^%g", d->terms[k], d->weights[k]);
}

/* ------------------------------------------------------------ label files */

static const struct {
    const char *name, *text;
} SETS[] = {
    {"business", ENGINE_DEFAULT_LABELS},
    {"rvl-cdip", ENGINE_RVL_CDIP_LABELS},
};

const char *engine_label_set(const char *name)
{
    for (size_t i = 0; name && i < sizeof SETS / sizeof SETS[0]; i++)
        if (strcmp(SETS[i].name, name) == 0)
            return SETS[i].text;
    return NULL;
}

const char *engine_label_set_name(int i)
{
    return i >= 0 && (size_t)i < sizeof SETS / sizeof SETS[0] ? SETS[i].name : NULL;
}

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

static char *trim(char *s)
{
    while (is_blank(*s))
        s++;
    size_t n = strlen(s);
    while (n && is_blank(s[n - 1]))
        s[--n] = '\0';
    return s;
}

static int valid_name(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_' || *s == ' ' || *s == '-'))
            return 0;
    return 1;
}

/* One line (modified in place). */
static int parse_line(struct engine_labels *l, char *line, struct folio_err *err)
{
    /* '#' starts a comment outside quotes */
    int q = 0;
    for (char *p = line; *p; p++) {
        if (*p == '"')
            q = !q;
        else if (*p == '#' && !q) {
            *p = '\0';
            break;
        }
    }
    if (q)
        return folio_err_set(err, FOLIO_EINVAL, "a quote is not closed");
    char *t = trim(line);
    if (!*t)
        return 0;
    /* the colon after the name, not one inside its (description) */
    char *colon = NULL;
    for (int depth = 0, qq = 0; !colon && *t; t++) {
        if (*t == '"')
            qq = !qq;
        else if (!qq && *t == '(')
            depth++;
        else if (!qq && *t == ')' && depth > 0)
            depth--;
        else if (!qq && !depth && *t == ':')
            colon = t;
        if (colon)
            break;
    }
    t = trim(line);
    if (!colon) {
        folio_err_set(err, FOLIO_EINVAL, "'%.60s' has no ':' between the label name and its keywords", t);
        folio_err_hint(err, "write lines as  name (description): keyword, \"a phrase\", weighted^3");
        return FOLIO_EINVAL;
    }
    *colon = '\0';
    char *name = trim(t), *desc = NULL;
    char *open = strchr(name, '(');
    if (open) {
        size_t nl = strlen(name);
        if (nl == 0 || name[nl - 1] != ')') {
            folio_err_set(err, FOLIO_EINVAL, "label '%.60s': text after the (description)", name);
            folio_err_hint(err, "write lines as  name (description): keyword, ...");
            return FOLIO_EINVAL;
        }
        name[nl - 1] = '\0';
        *open = '\0';
        desc = trim(open + 1);
        name = trim(name);
        if (strlen(desc) > ENGINE_LABEL_DESCRIPTION_MAX)
            return folio_err_set(err, FOLIO_EINVAL, "label '%s': the description is over %d bytes", name,
                                 ENGINE_LABEL_DESCRIPTION_MAX);
    }
    if (!valid_name(name) || strlen(name) > ENGINE_LABEL_MAX) {
        folio_err_set(err, FOLIO_EINVAL, "label name '%.70s' is not 1..%d of a-z 0-9 _ - and space", name,
                      ENGINE_LABEL_MAX);
        folio_err_hint(err, "label names are lower case, as in folio.labels");
        return FOLIO_EINVAL;
    }
    for (int i = 0; i < engine_labels_count(l); i++)
        if (strcmp(engine_labels_name(l, i), name) == 0)
            return folio_err_set(err, FOLIO_EINVAL, "label '%s' is defined twice", name);
    const char *kw[256];
    int n = 0;
    char *p = colon + 1;
    while (*p) {
        while (is_blank(*p))
            p++;
        if (!*p)
            break;
        char *start = p, *w = p;
        int inq = 0;
        for (; *p && (inq || *p != ','); p++) {
            if (*p == '"') {
                inq = !inq;
                continue;
            }
            *w++ = *p;
        }
        int more = *p == ',';
        if (more)
            p++;
        *w = '\0';
        char *k = trim(start);
        if (!*k) {
            if (more)
                return folio_err_set(err, FOLIO_EINVAL, "label '%s' has an empty keyword (two commas)", name);
            break;
        }
        if (n == (int)(sizeof kw / sizeof kw[0]))
            return folio_err_set(err, FOLIO_ELIMIT, "label '%s' has more than %d keywords", name, n);
        kw[n++] = k;
    }
    int rc = engine_labels_add(l, name, kw, n, err);
    if (!rc && desc && desc[0])
        rc = engine_labels_set_description(l, engine_labels_count(l) - 1, desc, err);
    return rc;
}

int engine_labels_parse_each(struct engine_labels *l, const char *text, const char *source,
                             void (*report)(void *ctx, const struct folio_err *e), void *ctx,
                             struct folio_err *err)
{
    int lineno = 0, bad = 0;
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        lineno++;
        char *line = malloc(len + 1);
        if (!line)
            return folio_err_set(err, FOLIO_ENOMEM, "out of memory reading %s", source);
        memcpy(line, p, len);
        line[len] = '\0';
        struct folio_err le = {0};
        int rc = parse_line(l, line, &le);
        free(line);
        if (rc) {
            folio_err_prefix(&le, "%s line %d: ", source, lineno);
            if (!report || rc == FOLIO_ENOMEM) {
                *err = le;
                return rc;
            }
            /* a bad line adds nothing (parse_line adds a label last), so
             * the lines after it are checked against the same set */
            report(ctx, &le);
            bad++;
        }
        p += len + (nl ? 1 : 0);
    }
    if (bad) {
        folio_err_set(err, FOLIO_EINVAL, "%s: %d line%s with problems", source, bad, bad == 1 ? "" : "s");
        return FOLIO_EINVAL;
    }
    if (engine_labels_count(l) == 0)
        return folio_err_set(err, FOLIO_EINVAL, "%s defines no labels", source);
    return 0;
}

int engine_labels_parse(struct engine_labels *l, const char *text, const char *source, struct folio_err *err)
{
    return engine_labels_parse_each(l, text, source, NULL, NULL, err);
}
