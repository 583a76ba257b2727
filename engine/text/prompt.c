/*
 * prompt — renders Qwen2-VL chat prompts straight to token ids and M-RoPE
 * positions.
 *
 * Rendering and tokenising are one pass: plain text (template text and
 * caller text alike) accumulates in a span buffer; a special token flushes
 * the span through the tokenizer with special parsing off, then appends
 * its own id. That reproduces the reference (render the string, tokenise
 * with specials) wherever caller text holds no special-token spelling,
 * and makes such spellings inert where it does. Positions are assigned as
 * tokens are appended, so the prompt never needs a second walk.
 */
#include "engine/text/prompt.h"

#include <stdlib.h>
#include <string.h>

struct span {
    char *p;
    size_t n, cap;
};

static int span_add(struct span *s, const char *text, size_t n)
{
    if (n > SIZE_MAX - s->n - 1)
        return FOLIO_ENOMEM;
    if (s->n + n + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 256;
        while (cap < s->n + n + 1)
            cap *= 2;
        char *np = realloc(s->p, cap);
        if (!np)
            return FOLIO_ENOMEM;
        s->p = np;
        s->cap = cap;
    }
    memcpy(s->p + s->n, text, n);
    s->n += n;
    return 0;
}

static int reserve_pos(struct prompt *p, size_t n)
{
    if (n <= p->pos_cap)
        return 0;
    size_t cap = p->pos_cap ? p->pos_cap : 256;
    while (cap < n)
        cap *= 2;
    int32_t *np = realloc(p->pos, cap * 3 * sizeof *np);
    if (!np)
        return FOLIO_ENOMEM;
    p->pos = np;
    p->pos_cap = cap;
    return 0;
}

static int oom(struct folio_err *err)
{
    return folio_err_set(err, FOLIO_ENOMEM, "out of memory building a prompt");
}

/* Gives positions (p, p, p) to tokens [from, ids.n). */
static int text_positions(struct prompt *p, size_t from, struct folio_err *err)
{
    if (reserve_pos(p, p->ids.n))
        return oom(err);
    for (size_t i = from; i < p->ids.n; i++) {
        if (p->next_pos == INT32_MAX)
            return folio_err_set(err, FOLIO_ELIMIT, "prompt positions exceed 2^31");
        int32_t *q = p->pos + 3 * i;
        q[0] = q[1] = q[2] = p->next_pos++;
    }
    return 0;
}

static int flush(const struct tok *t, struct prompt *p, struct span *s, struct folio_err *err)
{
    if (s->n == 0)
        return 0;
    size_t from = p->ids.n;
    int rc = tok_encode(t, s->p, s->n, 0, &p->ids, err);
    s->n = 0;
    return rc ? rc : text_positions(p, from, err);
}

static int special_id(const struct tok *t, const char *name, int32_t *id, struct folio_err *err)
{
    *id = tok_special_id(t, name);
    if (*id < 0) {
        folio_err_set(err, FOLIO_EMODEL, "the tokenizer has no special token %s", name);
        folio_err_hint(err, "use the text GGUF of a model folio runs (folio doctor --model "
                            "checks one)");
        return FOLIO_EMODEL;
    }
    return 0;
}

static int add_special(const struct tok *t, struct prompt *p, struct span *s, const char *name,
                       struct folio_err *err)
{
    int32_t id;
    int rc = special_id(t, name, &id, err);
    if (rc == 0)
        rc = flush(t, p, s, err);
    if (rc)
        return rc;
    if (tok_ids_push(&p->ids, id))
        return oom(err);
    return text_positions(p, p->ids.n - 1, err);
}

uint64_t prompt_image_tokens(uint32_t grid_h, uint32_t grid_w, uint32_t merge)
{
    if (merge == 0 || grid_h == 0 || grid_w == 0 || grid_h % merge || grid_w % merge)
        return 0;
    return (uint64_t)(grid_h / merge) * (grid_w / merge);
}

static int add_image(const struct tok *t, struct prompt *p, struct span *s,
                     const struct prompt_item *it, uint32_t merge, struct folio_err *err)
{
    uint64_t m = prompt_image_tokens(it->grid_h, it->grid_w, merge);
    if (m == 0)
        return folio_err_set(err, FOLIO_EINVAL, "image grid %ux%u is not a positive multiple of "
                             "the merge size %u", it->grid_h, it->grid_w, merge);
    if (m > (1u << 24))
        return folio_err_set(err, FOLIO_ELIMIT, "image grid %ux%u gives %llu image tokens "
                             "(limit 16M)", it->grid_h, it->grid_w, (unsigned long long)m);
    int32_t pad;
    int rc = add_special(t, p, s, "<|vision_start|>", err);
    if (rc == 0)
        rc = special_id(t, "<|image_pad|>", &pad, err);
    if (rc)
        return rc;
    uint32_t rows = it->grid_h / merge, cols = it->grid_w / merge;
    int32_t st = p->next_pos;
    if ((int64_t)st + (rows > cols ? rows : cols) >= INT32_MAX)
        return folio_err_set(err, FOLIO_ELIMIT, "prompt positions exceed 2^31");
    size_t first = p->ids.n;
    if (reserve_pos(p, first + m))
        return oom(err);
    for (uint32_t r = 0; r < rows; r++) {
        for (uint32_t c = 0; c < cols; c++) {
            if (tok_ids_push(&p->ids, pad))
                return oom(err);
            int32_t *q = p->pos + 3 * (p->ids.n - 1);
            q[0] = st;
            q[1] = st + (int32_t)r;
            q[2] = st + (int32_t)c;
        }
    }
    p->next_pos = st + (int32_t)(rows > cols ? rows : cols);
    if (p->n_images == p->images_cap) {
        size_t cap = p->images_cap ? p->images_cap * 2 : 4;
        struct prompt_image_span *ni = realloc(p->images, cap * sizeof *ni);
        if (!ni)
            return oom(err);
        p->images = ni;
        p->images_cap = cap;
    }
    p->images[p->n_images++] = (struct prompt_image_span){first, (size_t)m, rows, cols, st};
    return add_special(t, p, s, "<|vision_end|>", err);
}

char *prompt_instruction(const char *const *labels, uint32_t nl, size_t reserve, size_t *len)
{
    size_t cap = sizeof PROMPT_INSTRUCTION + 1 + reserve;
    for (uint32_t l = 0; l < nl; l++)
        cap += strlen(labels[l]) + 2;
    char *u = malloc(cap);
    if (!u)
        return NULL;
    size_t n = sizeof PROMPT_INSTRUCTION - 1;
    memcpy(u, PROMPT_INSTRUCTION, n);
    for (uint32_t l = 0; l < nl; l++) {
        size_t k = strlen(labels[l]);
        memcpy(u + n, labels[l], k);
        n += k;
        if (l + 1 < nl) {
            memcpy(u + n, ", ", 2);
            n += 2;
        }
    }
    u[n++] = '.';
    u[n] = 0;
    *len = n;
    return u;
}

void prompt_free(struct prompt *p)
{
    tok_ids_free(&p->ids);
    free(p->pos);
    free(p->images);
    memset(p, 0, sizeof *p);
}

int prompt_chat(const struct tok *t, const char *system, const struct prompt_item *user,
                size_t n_user, uint32_t merge, int generation_prompt, struct prompt *out,
                struct folio_err *err)
{
    struct prompt_opts o = {.system = system, .merge = merge,
                            .generation_prompt = generation_prompt};
    return prompt_chat_ex(t, &o, user, n_user, out, err);
}

int prompt_chat_ex(const struct tok *t, const struct prompt_opts *o,
                   const struct prompt_item *user, size_t n_user, struct prompt *out,
                   struct folio_err *err)
{
    prompt_free(out);
    struct span s = {0};
    const char *sys = o->system ? o->system : PROMPT_DEFAULT_SYSTEM;
    uint32_t merge = o->merge ? o->merge : 2;
    int generation_prompt = o->generation_prompt;
    int rc = 0;
    if (!o->no_system) {
        rc = add_special(t, out, &s, "<|im_start|>", err);
        if (rc == 0 &&
            ((rc = span_add(&s, "system\n", 7)) || (rc = span_add(&s, sys, strlen(sys)))))
            rc = oom(err);
        if (rc == 0)
            rc = add_special(t, out, &s, "<|im_end|>", err);
        if (rc == 0 && span_add(&s, "\n", 1))
            rc = oom(err);
    }
    if (rc == 0)
        rc = add_special(t, out, &s, "<|im_start|>", err);
    if (rc == 0 && span_add(&s, "user\n", 5))
        rc = oom(err);
    for (size_t i = 0; i < n_user && rc == 0; i++) {
        if (user[i].kind == PROMPT_IMAGE) {
            rc = add_image(t, out, &s, &user[i], merge, err);
        } else if (user[i].kind == PROMPT_TEXT) {
            if (span_add(&s, user[i].text ? user[i].text : "", user[i].text ? user[i].len : 0))
                rc = oom(err);
        } else {
            rc = folio_err_set(err, FOLIO_EINVAL, "prompt item %zu has unknown kind %d", i,
                               (int)user[i].kind);
        }
    }
    if (rc == 0)
        rc = add_special(t, out, &s, "<|im_end|>", err);
    if (rc == 0 && span_add(&s, "\n", 1))
        rc = oom(err);
    if (rc == 0 && generation_prompt) {
        rc = add_special(t, out, &s, "<|im_start|>", err);
        if (rc == 0 && span_add(&s, "assistant\n", 10))
            rc = oom(err);
    }
    if (rc == 0)
        rc = flush(t, out, &s, err);
    free(s.p);
    if (rc)
        prompt_free(out);
    return rc;
}

int prompt_append_text(const struct tok *t, struct prompt *p, const char *text, size_t len,
                       struct folio_err *err)
{
    size_t from = p->ids.n;
    int rc = tok_encode(t, text, len, 0, &p->ids, err);
    return rc ? rc : text_positions(p, from, err);
}

int prompt_append_special(const struct tok *t, struct prompt *p, const char *special,
                          struct folio_err *err)
{
    struct span s = {0};
    int rc = add_special(t, p, &s, special, err);
    free(s.p);
    return rc;
}

int prompt_continuation(const struct tok *t, const struct prompt *p, const char *label,
                        size_t len, int with_end, struct prompt *cont, struct folio_err *err)
{
    prompt_free(cont);
    cont->next_pos = p->next_pos;
    int rc = prompt_append_text(t, cont, label, len, err);
    if (rc == 0 && with_end)
        rc = prompt_append_special(t, cont, "<|im_end|>", err);
    if (rc == 0 && cont->ids.n == 0)
        rc = folio_err_set(err, FOLIO_EINVAL, "label continuation is empty");
    if (rc)
        prompt_free(cont);
    return rc;
}

void prompt_positions_sections(const struct prompt *p, int32_t *out, int n_sections)
{
    size_t n = p->ids.n;
    for (int k = 0; k < n_sections; k++)
        for (size_t i = 0; i < n; i++)
            out[(size_t)k * n + i] = k < 3 ? p->pos[3 * i + (size_t)k] : 0;
}
