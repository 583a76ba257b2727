/*
 * The label set's representation, shared by the files that read it from
 * the inside: labelset.c (which builds it), classify.c (the rules tier
 * counts its terms) and learned.c (which matches its label names). It
 * lives below both tiers so that neither includes the other's file
 * (issue #31: the classify.c <-> learned.c circle).
 */
#ifndef FOLIO_ENGINE_LABELS_INTERNAL_H
#define FOLIO_ENGINE_LABELS_INTERNAL_H

#include "engine/engine.h"

/* The weight of a label's own name when its keywords do not give one. */
#define ENGINE_NAME_WEIGHT 2.0
#define ENGINE_KEYWORD_WEIGHT_MAX 100.0

struct engine_label_def {
    char *name;
    char *description; /* NULL or what the label file's (description) said */
    char **terms; /* normalised keywords */
    double *weights;
    int n_terms;
    double name_weight; /* ENGINE_NAME_WEIGHT unless the keywords list the name */
};

struct engine_labels {
    struct engine_label_def *v;
    const char **names; /* parallel to v, for engine_result.names */
    int n, cap;
};

/* A byte that belongs to a word (ASCII letter or digit, or any byte of a
 * UTF-8 sequence): word boundaries of the rules tier, words of the
 * learned tier. */
int engine_is_word_byte(unsigned char c);

/* Lower-cases ASCII and folds whitespace runs to one space, trimmed
 * (malloc'd; NULL when out of memory). */
char *engine_text_normalise(const char *s);

#endif
