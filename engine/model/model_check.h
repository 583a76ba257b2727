/*
 * model_check — the primitives of the model checks (model_check.c), below
 * both the generic checks (gguf_model.c) and the families' own
 * (engine/arch/<family>/): one tensor expected in a dtype class and shape,
 * optional keys recorded as assumptions, and the walk of a family's tensor
 * table (engine/arch/arch.h) that claims each tensor and lists it for the
 * loaders with the table entry it matched.
 */
#ifndef FOLIO_MODEL_CHECK_H
#define FOLIO_MODEL_CHECK_H

#include "engine/arch/arch.h"
#include "engine/model/gguf_model.h"

/* One check in progress: the file, the model being filled, which tensors
 * are claimed (per tensor index) and where errors go. */
struct model_check {
    struct gguf_file *f;
    struct gguf_model *m;
    uint8_t *claimed;
    struct folio_err *err;
};

/* Checks one tensor against the expected shape (nd dims of ne0..ne3) and
 * dtype class (enum arch_dclass), and appends it to the load list.
 * Optional tensors may be absent (*found = 0). */
int model_check_expect(struct model_check *c, const char *name, int cls, int on_host, uint32_t nd,
                       uint64_t ne0, uint64_t ne1, uint64_t ne2, uint64_t ne3, int optional,
                       int *found);
/* "inconsistent hyper-parameters: what" */
int model_check_bad_hparam(struct model_check *c, const char *what);
/* Optional keys: the file's value, or dflt recorded as an assumption (the
 * doctor prints it; the engine logs it at open). */
int model_check_opt_u32(struct model_check *c, const char *key, uint32_t dflt, const char *why,
                        uint32_t *out);
int model_check_opt_f32(struct model_check *c, const char *key, float dflt, const char *why,
                        float *out);
/* Walks a family's tensor table over the model's blocks (and DeepStack
 * mergers): PRE entries, each block's LAYER entries, POST, each merger's
 * DEEPSTACK entries, each in table order, so that an error names the
 * first mismatch the way a reader walks the model. */
int model_check_table(struct model_check *c, const struct arch_tensor *t, uint32_t n);
/* Every tensor the file holds was claimed (else: a variant folio does not
 * implement). */
int model_check_no_extras(struct model_check *c);

#endif
