/*
 * prompt — Qwen2-VL / Qwen2.5-VL chat prompts as token ids plus 3-D M-RoPE
 * positions (docs/reference/qwen25vl.md §4.3, §5).
 *
 * A chat prompt renders as
 *   <|im_start|>system\n{system}<|im_end|>\n
 *   <|im_start|>user\n{items}<|im_end|>\n
 *   <|im_start|>assistant\n                      (generation prompt)
 * where an image item is <|vision_start|>{M x <|image_pad|>}<|vision_end|>
 * with M = (grid_h/merge)(grid_w/merge), and a text item is the text.
 * Caller text (system, user items, labels) is never scanned for special
 * tokens: a document whose OCR text contains "<|im_end|>" cannot end the
 * turn. Text between two special tokens is tokenised as one span, exactly
 * as the reference tokenises the rendered string.
 *
 * Positions: each token has (t, h, w). Text tokens take (p, p, p) and
 * advance p by one. The M pads of an image whose first pad would be at
 * position s take (s, s + row, s + col) in row-major merged-grid order,
 * and the next token continues at s + max(rows, cols).
 */
#ifndef FOLIO_PROMPT_H
#define FOLIO_PROMPT_H

#include "common/common.h"
#include "engine/text/tokenizer.h"

#include <stddef.h>
#include <stdint.h>

#define PROMPT_DEFAULT_SYSTEM "You are a helpful assistant."
/* The classification instruction both tiers put before the label list
 * (vision: vlm.c; OCR text: lm_text.c), spelled once so they cannot drift. */
#define PROMPT_INSTRUCTION "Classify this document. Answer with one label: "
/* PROMPT_INSTRUCTION, the label names ("a, b, c") and a full stop, built
 * once for both tiers: malloc'd with room for reserve more bytes and a
 * NUL after the *len written (the OCR tier appends its text). NULL when
 * out of memory. */
char *prompt_instruction(const char *const *labels, uint32_t nl, size_t reserve, size_t *len);

enum prompt_item_kind { PROMPT_TEXT, PROMPT_IMAGE };

struct prompt_item {
    enum prompt_item_kind kind;
    const char *text; /* PROMPT_TEXT: UTF-8, len bytes */
    size_t len;
    uint32_t grid_h, grid_w; /* PROMPT_IMAGE: patch grid (multiples of merge) */
};

/* Where an image's pad tokens are, for splicing the vision embeddings. */
struct prompt_image_span {
    size_t first;          /* index of the first <|image_pad|> */
    size_t count;          /* M */
    uint32_t rows, cols;   /* merged grid: grid_h/merge, grid_w/merge */
    int32_t pos_start;     /* s */
};

struct prompt {
    struct tok_ids ids;
    int32_t *pos;          /* 3 per token, interleaved: t, h, w */
    size_t pos_cap;        /* tokens that pos has room for */
    int32_t next_pos;      /* position of the next token (decode / continuation) */
    struct prompt_image_span *images;
    size_t n_images, images_cap;
};

/* Builds a full chat prompt. system NULL = the default system turn ("You
 * are a helpful assistant.", as the reference template inserts it).
 * merge: the vision spatial merge size (2; 0 means 2). generation_prompt: append
 * "<|im_start|>assistant\n". out must be zero-initialised or freed. */
int prompt_chat(const struct tok *t, const char *system, const struct prompt_item *user,
                size_t n_user, uint32_t merge, int generation_prompt, struct prompt *out,
                struct folio_err *err);

/* The same with every option spelled out; no_system drops the system turn
 * entirely (the prompt then starts at <|im_start|>user). */
struct prompt_opts {
    const char *system;    /* NULL: PROMPT_DEFAULT_SYSTEM */
    int no_system;
    uint32_t merge;        /* 0: 2 */
    int generation_prompt;
};
int prompt_chat_ex(const struct tok *t, const struct prompt_opts *o,
                   const struct prompt_item *user, size_t n_user, struct prompt *out,
                   struct folio_err *err);

/* Appends text (no special-token parsing) with positions continuing from
 * p->next_pos. */
int prompt_append_text(const struct tok *t, struct prompt *p, const char *text, size_t len,
                       struct folio_err *err);
/* Appends one special token by its spelling ("<|im_end|>"). */
int prompt_append_special(const struct tok *t, struct prompt *p, const char *special,
                          struct folio_err *err);

/* A label's continuation after prompt p: its tokens (as the assistant's
 * answer), optionally followed by <|im_end|>, with positions starting at
 * p->next_pos. cont must be zero-initialised or freed. */
int prompt_continuation(const struct tok *t, const struct prompt *p, const char *label,
                        size_t len, int with_end, struct prompt *cont, struct folio_err *err);

/* Pads an image of this grid expands to (0 when not multiples of merge). */
uint64_t prompt_image_tokens(uint32_t grid_h, uint32_t grid_w, uint32_t merge);

/* Positions in ggml's rope_multi layout: n_sections (3 or 4) blocks of n
 * values each, [t..., h..., w..., 0...]. out holds n_sections * ids.n. */
void prompt_positions_sections(const struct prompt *p, int32_t *out, int n_sections);

void prompt_free(struct prompt *p);

#endif
