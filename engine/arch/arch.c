/*
 * The registry of model families: every descriptor folio runs, in the
 * order the checks try them. A new family adds its descriptors here and
 * nothing anywhere else (docs/ARCHITECTURE.md, "Model families").
 */
#include "engine/arch/arch.h"
#include "engine/arch/qwen2vl/qwen2vl.h"
#include "engine/arch/qwen3vl/qwen3vl.h"

#include <stdio.h>
#include <string.h>

static const struct arch_text *const TEXT[] = {&arch_qwen2vl_text, &arch_qwen3vl_text};
static const struct arch_tower *const TOWER[] = {&arch_qwen2vl_tower, &arch_qwen25vl_tower,
                                                 &arch_qwen3vl_tower};
#define N_TEXT (sizeof TEXT / sizeof TEXT[0])
#define N_TOWER (sizeof TOWER / sizeof TOWER[0])

static int eq(const char *s, const char *p, size_t n)
{
    return s && strlen(s) == n && memcmp(s, p, n) == 0;
}

const struct arch_text *arch_text_find(const char *name, size_t n)
{
    for (size_t i = 0; i < N_TEXT; i++)
        if (eq(TEXT[i]->name, name, n))
            return TEXT[i];
    return NULL;
}

const struct arch_text *arch_text_refusing(const char *name, size_t n)
{
    for (size_t i = 0; i < N_TEXT; i++)
        if (eq(TEXT[i]->refused, name, n))
            return TEXT[i];
    return NULL;
}

const struct arch_tower *arch_tower_find(const char *name, size_t n)
{
    for (size_t i = 0; i < N_TOWER; i++)
        for (size_t j = 0; j < sizeof TOWER[i]->projector / sizeof TOWER[i]->projector[0]; j++)
            if (eq(TOWER[i]->projector[j], name, n))
                return TOWER[i];
    return NULL;
}

const struct arch_text *arch_text_at(uint32_t i)
{
    return i < N_TEXT ? TEXT[i] : NULL;
}

const struct arch_tower *arch_tower_at(uint32_t i)
{
    return i < N_TOWER ? TOWER[i] : NULL;
}

const struct arch_tensor *arch_text_embedding(const struct arch_text *A)
{
    for (uint32_t i = 0; i < A->n_tensors; i++)
        if (A->tensors[i].flags & ARCH_HOST_UNLESS_TIED)
            return &A->tensors[i];
    return NULL;
}

const struct arch_tensor *arch_text_head(const struct arch_text *A)
{
    const struct arch_tensor *E = arch_text_embedding(A);
    for (uint32_t i = 0; E && i < A->n_tensors; i++)
        if (A->tensors[i].group == ARCH_POST && A->tensors[i].slot == E->slot)
            return &A->tensors[i];
    return NULL;
}

const char *arch_list(enum arch_list what, char *out, size_t n)
{
    size_t at = 0, count = what == ARCH_LIST_TEXT ? N_TEXT : N_TOWER;
    out[0] = 0;
    for (size_t i = 0; i < count && at < n; i++) {
        const char *sep = i ? ", " : "";
        int k = what == ARCH_LIST_TEXT
                    ? snprintf(out + at, n - at, "%s%s (architecture %s)", sep, TEXT[i]->display,
                               TEXT[i]->name)
                : what == ARCH_LIST_TOWERS
                    ? snprintf(out + at, n - at, "%s%s (%s)", sep, TOWER[i]->projector[0],
                               TOWER[i]->display)
                    : snprintf(out + at, n - at, "%s%s", sep, TOWER[i]->display);
        at += k > 0 ? (size_t)k : 0;
    }
    return out;
}
