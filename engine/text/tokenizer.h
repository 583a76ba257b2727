/*
 * tokenizer — Qwen2 byte-level BPE, loaded from a GGUF's tokenizer.ggml.*
 * keys (tokens, merges, token_type), with the qwen2 pre-tokenizer written
 * by hand (no regex engine).
 *
 * Encoding: (1) with parse_special, control and user-defined tokens
 * (<|im_start|>, <|image_pad|>, ...) are cut out of the text first, longest
 * match first, and emitted as their ids; (2) each remaining span is split
 * by the qwen2 pre-tokenizer pattern
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}
 *   | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * (each span between specials is NFC-normalised first, as Qwen2's
 * tokenizer.json declares); (3) each piece's bytes are merged by BPE, lowest merge rank first (ties:
 * leftmost), and the resulting symbols are the ids.
 *
 * Reference: Hugging Face tokenizers as the current transformers release
 * installs it (>= 0.22; the same since 0.21.2). Its split regex runs on
 * Oniguruma with Unicode 16.0 data, so \p{L} and \p{N} are Unicode 16.0; its
 * NFC (the unicode-normalization-alignments crate) has Unicode 9.0 tables,
 * so a mark assigned after 9.0 is a starter that NFC leaves in place. folio
 * follows both (engine/tools/gen_unicode_common.py has the evidence).
 *
 * Cost is linear in the input, whatever it holds: NFC sorts long runs of
 * combining marks by counting, the pre-tokenizer never rescans, and BPE on a
 * long piece uses a heap (n log n).
 *
 * A loaded tokenizer is immutable: one may be shared by threads, each with
 * its own output vectors.
 */
#ifndef FOLIO_TOKENIZER_H
#define FOLIO_TOKENIZER_H

#include "common/common.h"
#include "engine/gguf/gguf.h"

#include <stddef.h>
#include <stdint.h>

/* tokenizer.ggml.token_type values (gguf-py TokenType). */
enum tok_type {
    TOK_NORMAL = 1,
    TOK_UNKNOWN = 2,
    TOK_CONTROL = 3,
    TOK_USER_DEFINED = 4,
    TOK_UNUSED = 5,
    TOK_BYTE = 6,
};

struct tok;

/* A growable vector of token ids; zero-initialise, free with tok_ids_free. */
struct tok_ids {
    int32_t *v;
    size_t n, cap;
};

/* Builds the tokenizer from an open GGUF (copies everything it needs, so
 * the file may be closed afterwards). Refuses anything but byte-level BPE
 * ("gpt2") with the "qwen2" pre-tokenizer, and vocabularies that lack a
 * token for one of the 256 bytes. */
int tok_load(const struct gguf_file *f, struct tok **out, struct folio_err *err);
/* tok_load with options. Qwen2's reference tokenizer NFC-normalises each
 * span between special tokens before pre-tokenising, and so does folio by
 * default; TOK_LOAD_NO_NFC turns that off (llama.cpp's behaviour). */
enum { TOK_LOAD_NO_NFC = 1 };
int tok_load_ex(const struct gguf_file *f, unsigned flags, struct tok **out,
                struct folio_err *err);
void tok_free(struct tok *t);

uint32_t tok_n_vocab(const struct tok *t);
uint32_t tok_n_merges(const struct tok *t); /* usable merges (bad ones are skipped) */
uint32_t tok_n_skipped_merges(const struct tok *t); /* merges naming non-tokens */
uint32_t tok_n_specials(const struct tok *t); /* control + user-defined tokens */
int tok_type(const struct tok *t, int32_t id); /* enum tok_type, 0 for bad ids */
/* The bytes a token stands for (byte-level decoded; specials as written).
 * NULL for an id out of range. */
const char *tok_piece(const struct tok *t, int32_t id, size_t *len);
/* Id of the control / user-defined token spelled exactly `text`, or -1. */
int32_t tok_special_id(const struct tok *t, const char *text);

/* Appends the ids of text[0..len) to out. Invalid UTF-8 is tokenised byte
 * by byte (each stray byte is its own character), never refused. Text is
 * NFC-normalised unless loaded with TOK_LOAD_NO_NFC, so decoding gives back
 * the NFC form of the input (the input itself when it was NFC). */
int tok_encode(const struct tok *t, const char *text, size_t len, int parse_special,
               struct tok_ids *out, struct folio_err *err);
/* A per-thread memo of recent pieces → ids (direct-mapped, 256 KiB). OCR
 * text repeats its words, so most pieces skip BPE; results are identical
 * with or without it. Owned by one thread; never shared. */
struct tok_cache;
struct tok_cache *tok_cache_new(void);
void tok_cache_free(struct tok_cache *c);
/* tok_encode with a cache (NULL: none). The cache remembers which
 * tokenizer filled it and starts over when used with another. */
int tok_encode_cached(const struct tok *t, struct tok_cache *c, const char *text, size_t len,
                      int parse_special, struct tok_ids *out, struct folio_err *err);

/* Appends the bytes of ids to *buf (malloc'd, grown as needed; *len
 * updated). skip_special drops control tokens. Bad ids are an error. */
int tok_decode(const struct tok *t, const int32_t *ids, size_t n, int skip_special, char **buf,
               size_t *len, size_t *cap, struct folio_err *err);

/* NFC. tok_nfc_quick: 1 when text is certainly NFC already (no code point
 * that could change under NFC). tok_nfc: the NFC form, malloc'd and
 * NUL-terminated; invalid UTF-8 bytes pass through. */
int tok_nfc_quick(const char *text, size_t len);
int tok_nfc(const char *text, size_t len, char **out, size_t *out_len);

/* The Unicode versions the tables follow: "16.0.0" (pre-tokenizer letter
 * and number classes) and "9.0.0" (NFC). */
const char *tok_unicode_regex_version(void);
const char *tok_unicode_nfc_version(void);

/* The qwen2 pre-tokenizer alone: the end offset of the pre-token that
 * starts at byte i of text[0..len) (i < len). Exposed for tests and
 * diagnostics; tok_encode uses it internally. */
size_t tok_pretoken_end(const char *text, size_t len, size_t i);

int tok_ids_push(struct tok_ids *v, int32_t id);
void tok_ids_free(struct tok_ids *v);

#endif
