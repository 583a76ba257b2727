/* The default taxonomy (issue 33: a business inbox) on generated
 * documents of its types (tests/support/doc_corpus.py "business", text
 * standing in for OCR output): each type, the four new ones among them, is
 * recognised by the keyword rules; a receipt is not an invoice; the
 * RVL-CDIP set is still there by name; every default label has a
 * description. */
#include "engine/engine.h"
#include "tests/support/corpus_text.h"
#include "tests/support/testutil.h"

#include <stdlib.h>
#include <string.h>

#define MAX_DOCS 256

int main(void)
{
    struct folio_err err = {0};
    struct engine_labels *l = engine_labels_new();
    REQUIRE(l && engine_labels_parse(l, ENGINE_DEFAULT_LABELS, "business", &err) == 0, "%s", err.msg);
    static const char *const want[] = {"receipt", "invoice", "purchase order", "delivery note", "contract",
                                       "bank statement", "payslip", "tax form", "letter", "email", "form",
                                       "resume", "report", "memo"};
    CHECK(engine_labels_count(l) == 14, "%d default labels", engine_labels_count(l));
    for (int i = 0; i < 14 && i < engine_labels_count(l); i++) {
        CHECK(strcmp(engine_labels_name(l, i), want[i]) == 0, "label %d: %s", i, engine_labels_name(l, i));
        CHECK(strlen(engine_labels_description(l, i)) > 10, "label %s has no description", engine_labels_name(l, i));
    }
    CHECK(engine_label_set("business") == ENGINE_DEFAULT_LABELS && engine_label_set("rvl-cdip") &&
              !engine_label_set("nope"),
          "named sets");
    struct engine_labels *rvl = engine_labels_new();
    CHECK(rvl && engine_labels_parse(rvl, engine_label_set("rvl-cdip"), "rvl-cdip", &err) == 0 &&
              engine_labels_count(rvl) == 16 && strlen(engine_labels_description(rvl, 0)) > 10,
          "rvl-cdip: %s", err.msg);
    engine_labels_free(rvl);

    /* descriptions in a label file: optional, may hold a colon, must close */
    struct engine_labels *d = engine_labels_new();
    CHECK(engine_labels_parse(d, "a (one: with a colon): x\nb: y\n", "t", &err) == 0 &&
              strcmp(engine_labels_description(d, 0), "one: with a colon") == 0 &&
              strcmp(engine_labels_description(d, 1), "") == 0,
          "descriptions: %s", err.msg);
    engine_labels_free(d);
    d = engine_labels_new();
    CHECK(engine_labels_parse(d, "a (open: x\n", "t", &err) == FOLIO_EINVAL, "an unclosed description parsed");
    engine_labels_free(d);

    static struct ct_doc docs[MAX_DOCS];
    int n = ct_load_set(tu_scratch("taxonomy"), 12, "business", docs, MAX_DOCS);
    REQUIRE(n >= 10 * 12, "%d generated documents", n);
    int right = 0, receipt_invoice = 0, per_n[14] = {0}, per_right[14] = {0};
    for (int i = 0; i < n; i++) {
        struct engine_result r;
        memset(&r, 0, sizeof r);
        CHECK(engine_rules_score(l, docs[i].text, &r, &err) == 0, "%s", err.msg);
        int ok = strcmp(r.label, docs[i].label) == 0;
        right += ok;
        receipt_invoice += strcmp(docs[i].label, "receipt") == 0 && strcmp(r.label, "invoice") == 0;
        for (int k = 0; k < 14; k++)
            if (strcmp(want[k], docs[i].label) == 0) {
                per_n[k]++;
                per_right[k] += ok;
            }
        if (!ok && getenv("FOLIO_TEST_VERBOSE"))
            fprintf(stderr, "%s %s -> %s %.2f\n", docs[i].file, docs[i].label, r.label, r.confidence);
        engine_result_free(&r);
    }
    fprintf(stderr, "business set on %d generated documents: %d right\n", n, right);
    for (int k = 0; k < 14; k++)
        if (per_n[k]) {
            fprintf(stderr, "  %-15s %d/%d\n", want[k], per_right[k], per_n[k]);
            CHECK(per_right[k] * 10 >= per_n[k] * 9, "%s: %d of %d right", want[k], per_right[k], per_n[k]);
        }
    CHECK(receipt_invoice == 0, "%d receipts became invoices", receipt_invoice);
    ct_free(docs, n);
    engine_labels_free(l);
    return tu_finish();
}
