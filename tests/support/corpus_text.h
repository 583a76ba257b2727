/*
 * The generated documents of tests/support/doc_corpus.py as text (the
 * text the bench corpus is rendered from), for tests that stand them in
 * for OCR output: ct_load writes them to dir and reads them back.
 */
#ifndef FOLIO_TESTS_CORPUS_TEXT_H
#define FOLIO_TESTS_CORPUS_TEXT_H

#include "engine/engine.h"
#include "tests/support/testutil.h"

#include <stdlib.h>
#include <string.h>

struct ct_doc {
    char file[16], label[ENGINE_LABEL_MAX + 1], split[16];
    char *text;
};

static inline char *ct_slurp(const char *path)
{
    char *t = NULL;
    struct folio_err err = {0};
    return folio_read_text(path, 1u << 20, &t, &err) ? NULL : t;
}

/* Reads dir/corpus.tsv and the texts it names into d[0..max); the count. */
static inline int ct_read_dir(const char *dir, struct ct_doc *d, int max)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/corpus.tsv", dir);
    char *tsv = ct_slurp(path);
    if (!tsv)
        return 0;
    int n = 0;
    char *save = NULL;
    strtok_r(tsv, "\n", &save); /* header */
    for (char *line = strtok_r(NULL, "\n", &save); line && n < max; line = strtok_r(NULL, "\n", &save)) {
        char *f[10];
        int k = 0;
        for (char *s2 = NULL, *c = strtok_r(line, "\t", &s2); c && k < 10; c = strtok_r(NULL, "\t", &s2))
            f[k++] = c;
        if (k < 10)
            continue;
        snprintf(d[n].file, sizeof d[n].file, "%s", f[0]);
        snprintf(d[n].label, sizeof d[n].label, "%s", f[1]);
        snprintf(d[n].split, sizeof d[n].split, "%s", f[9]);
        snprintf(path, sizeof path, "%s/%s.txt", dir, f[0]);
        d[n].text = ct_slurp(path);
        if (d[n].text)
            n++;
    }
    free(tsv);
    return n;
}

/* per_type documents of each type of set ("rvl", "business" or "office";
 * seed 16) into d[0..max); the count. */
static inline int ct_load_set(const char *dir, int per_type, const char *set, struct ct_doc *d, int max)
{
    char out[2048];
    const char *seed = getenv("FOLIO_TEST_CORPUS_SEED"); /* another draw, to check what was tuned on 16 */
    if (tu_sh_out(out, sizeof out, "python3 '%s/tests/support/doc_corpus.py' '%s' %d %s %s",
                  getenv("FOLIO_SOURCE_DIR"), dir, per_type, seed ? seed : "16", set) != 0) {
        fprintf(stderr, "doc_corpus.py: %s\n", out);
        return 0;
    }
    return ct_read_dir(dir, d, max);
}

/* The held-out generator's documents (tests/support/heldout_corpus.py: all
 * 14 default types, written apart from the keywords; the first 20 of each
 * type "train", the rest "heldout") into d[0..max); the count. */
static inline int ct_load_heldout(const char *dir, int per_type, int seed, struct ct_doc *d, int max)
{
    char out[2048];
    if (tu_sh_out(out, sizeof out, "python3 '%s/tests/support/heldout_corpus.py' '%s' %d %d",
                  getenv("FOLIO_SOURCE_DIR"), dir, per_type, seed) != 0) {
        fprintf(stderr, "heldout_corpus.py: %s\n", out);
        return 0;
    }
    return ct_read_dir(dir, d, max);
}

/* engine_text_fn over a string (the document's text as its OCR output). */
static inline int ct_text_of(void *ctx, struct engine_text *out, struct folio_err *err)
{
    out->text = strdup(ctx);
    return out->text ? 0 : folio_err_set(err, FOLIO_ENOMEM, "out of memory for a text");
}

static inline int ct_load(const char *dir, int per_type, struct ct_doc *d, int max)
{
    return ct_load_set(dir, per_type, "rvl", d, max);
}

static inline void ct_free(struct ct_doc *d, int n)
{
    for (int i = 0; i < n; i++)
        free(d[i].text);
}

#endif
