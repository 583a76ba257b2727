/*
 * gguf_model — the model view of a GGUF file (gguf_model.c): checks that
 * a container is a text model or mmproj of a family folio runs (the
 * registry, engine/arch/arch.c), with every tensor of
 * the family's table in the right dtype and shape, and turns it into
 * hyper-parameters plus the list of tensors the engine uploads. Defaults
 * folio supplies for absent keys are recorded (struct gguf_assumed) so
 * that none is silent. The reader is gguf.h.
 */
#ifndef FOLIO_GGUF_MODEL_H
#define FOLIO_GGUF_MODEL_H

#include "engine/gguf/gguf.h"

struct arch_text;
struct arch_tower;
struct arch_tensor;

struct gguf_text_hparams {
    /* the family's descriptor (engine/arch/arch.h): what the engines ask
     * instead of testing the family; it is also the family's identity
     * (arch->name, its general.architecture) */
    const struct arch_text *arch;
    uint32_t n_deepstack;   /* Qwen3-VL: layers 0..n-1 add a DeepStack row at image tokens */
    uint32_t n_vocab;       /* token_embd rows */
    uint32_t n_tokens;      /* tokenizer.ggml.tokens length (<= n_vocab) */
    uint32_t n_embd, n_layer, n_ff, n_head, n_head_kv, head_dim, n_ctx_train;
    float rope_theta, rms_eps;
    int32_t mrope_sections[4];
    int tied_output;        /* no output.weight: the LM head is token_embd */
    int32_t bos_id, eos_id, pad_id; /* -1 when absent */
};

#define GGUF_MAX_DEEPSTACK 8

struct gguf_vision_hparams {
    const struct arch_tower *arch; /* the tower's descriptor and identity (engine/arch/arch.h) */
    uint32_t n_embd, n_layer, n_head, head_dim, n_ff; /* n_ff from tensor shapes */
    uint32_t patch_size, spatial_merge, proj_dim, merger_dim;
    uint32_t n_wa_pattern, window_size; /* 0 / 0 for Qwen2-VL */
    int use_silu;                        /* SwiGLU (2.5) vs quick-GELU MLP (2) */
    int ffn_swapped;                     /* legacy file with ffn_up/down names swapped */
    float eps;
    float image_mean[3], image_std[3];
    /* Qwen3-VL: learned position table of n_pos = side^2 rows (interpolated
     * to the patch grid), DeepStack mergers after these blocks (ascending) */
    uint32_t n_pos, pos_side;
    uint32_t n_deepstack, deepstack_layers[GGUF_MAX_DEEPSTACK];
};

/* One tensor the engine must upload (or, for host tensors, keep mapped). */
struct gguf_load_item {
    const struct gguf_tensor_info *t;
    int on_host; /* token_embd: rows gathered on the CPU per request */
    /* The family's table entry it matched and its block (or DeepStack
     * merger) index: the loaders' slot for it (engine/arch/arch.h). */
    const struct arch_tensor *spec;
    uint32_t index;
};

/* A key the file lacks whose value folio supplied: `folio doctor` lists
 * each as "assumed" so that no default is silent. */
#define GGUF_MAX_ASSUMED 12
struct gguf_assumed {
    const char *key;  /* static string */
    char value[32];   /* as printed */
    const char *why;  /* where the value comes from */
};

struct gguf_model {
    struct gguf_file *file;
    struct gguf_assumed assumed[GGUF_MAX_ASSUMED];
    uint32_t n_assumed;
    uint32_t n_ignored;    /* keys in the file folio does not read (debug-logged) */
    int is_vision;
    struct gguf_text_hparams text;
    struct gguf_vision_hparams vision;
    struct gguf_load_item *items;
    uint64_t n_items;
    uint64_t device_bytes; /* sum over device tensors, each rounded up to 256 B */
    uint64_t host_bytes;
};

/* Opens path and checks it is a text model of a registered family
 * (general.architecture qwen2vl, qwen3vl, ...) with every expected tensor
 * in the right dtype and shape. */
int gguf_model_open_text(const char *path, struct gguf_model **out, struct folio_err *err);
/* Same for an mmproj (clip, a registered tower's projector type). */
int gguf_model_open_vision(const char *path, struct gguf_model **out, struct folio_err *err);
/* The distinct types of the model's 2-D device tensors (the matmul
 * pipelines pre-warm needs), appended to types[0..n) without repeats, at
 * most max in all; returns the new count. */
int gguf_model_matrix_types(const struct gguf_model *m, int *types, int n, int max);
/* The checks alone, on an already-open file (takes ownership of f on success
 * and on failure). */
int gguf_model_check(struct gguf_file *f, int vision, struct gguf_model **out,
                     struct folio_err *err);
void gguf_model_close(struct gguf_model *m);
/* Device bytes the model's matrices (2-D device tensors) take once
 * expanded to f16 (--gpu-weights). */
uint64_t gguf_model_matrix_f16_bytes(const struct gguf_model *m);
/* 1 when folio reads this key (or it is general.* metadata); the checks
 * debug-log and count every other key and otherwise ignore it. */
int gguf_key_used(const char *key);

#endif
