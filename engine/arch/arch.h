/*
 * arch — a model family as one descriptor (engine/arch/<family>/), and the
 * registry of families (arch.c).
 *
 * The engines of engine/model/ are family-agnostic: the checks
 * (gguf_model.c), the text decoder (lm*.c), the vision tower's skeleton
 * (vision.c), the self-test and the prompts ask the family's descriptor
 * what differs and never name a family themselves. A descriptor holds:
 *  - detection: the general.architecture (text) or projector type (mmproj)
 *    it answers to, and the names it refuses with a reason;
 *  - the text key table (struct arch_text_keys) and the tower's own keys;
 *  - ONE tensor table per model (struct arch_tensor): the checker walks it
 *    to claim, shape-check and list the file's tensors, and records each
 *    listed tensor's entry in the load list, so the loaders put a tensor
 *    into the slot that entry names without spelling a name again;
 *  - the text hooks the decoder calls (struct arch_text, lm_*), the
 *    tower's family table (struct vis_family, tower_internal.h);
 *  - prompt and self-test choices, and what `folio doctor` prints.
 * A new family is one folder engine/arch/<family>/ whose descriptors are
 * listed in arch.c (docs/ARCHITECTURE.md, "Model families").
 */
#ifndef FOLIO_ARCH_H
#define FOLIO_ARCH_H

#include "common/common.h"
#include "engine/model/gguf_model.h"
#include "engine/vk/vkr.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct lm;
struct lm_layer;
struct lm_seq;
struct vis_family;
struct vkr_cmd;
struct prep_config;
struct model_check;

/* ---------------------------------------------------------------- tensors */

/* dtype class of a tensor */
enum arch_dclass {
    ARCH_VEC,   /* norms and biases: always F32 in converted files */
    ARCH_MAT,   /* weight matrices: any supported type */
    ARCH_FLOAT, /* patch embedding: F32/F16/BF16 (ne0 = 14 cannot be block-quantised) */
};

/* A dimension of an expected shape, resolved from the file's own
 * hyper-parameters (model_check.c). Text: E width, Q attention width
 * (heads x head size), KV key/value width, F FFN width, D head size, V
 * vocabulary. Vision: E width, F FFN width, P patch side, M merger width,
 * O output width, NPOS position-table rows, E3 fused-QKV width. */
enum arch_dim {
    AD_1 = 0, AD_3, AD_E, AD_Q, AD_KV, AD_F, AD_D, AD_V, AD_P, AD_M, AD_O, AD_NPOS, AD_E3,
};

/* Where a table entry sits in the walk (and which struct its slot is in):
 * PRE and POST once (struct lm / struct vis), LAYER once per block
 * (struct lm_layer / struct vis_layer), DEEPSTACK once per DeepStack
 * merger (struct vis_ds; the name takes the block number). */
enum arch_group { ARCH_PRE = 0, ARCH_LAYER, ARCH_POST, ARCH_DEEPSTACK };

enum arch_flag {
    ARCH_OPTIONAL = 1,          /* may be absent */
    ARCH_HOST = 2,              /* kept in the mapping, not uploaded */
    ARCH_HOST_UNLESS_TIED = 4,  /* token_embd: on the host unless it is also the LM head */
    ARCH_IF_SWAPPED = 8,        /* only in legacy files with ffn_up/down names swapped */
    ARCH_IF_NOT_SWAPPED = 16,   /* only in files with the usual names */
};

/* How a loader takes the tensor: into its slot, or as the tower says. */
enum arch_load {
    ARCH_LOAD_SLOT = 0,  /* uploaded into the slot */
    ARCH_LOAD_PATCH0,    /* the patch kernel's two temporal halves: folded by vision.c */
    ARCH_LOAD_PATCH1,
    ARCH_LOAD_QKV,       /* a fused QKV matrix, split into wq/wk/wv (the family's load) */
    ARCH_LOAD_QKV_BIAS,  /* its bias, split into bq/bk/bv */
    ARCH_LOAD_TABLE,     /* a host table the family keeps (Qwen3-VL's positions) */
};

struct arch_tensor {
    const char *name;  /* printf format; LAYER/DEEPSTACK names take the block number (%u) */
    uint8_t group;     /* enum arch_group */
    uint8_t cls;       /* enum arch_dclass */
    uint8_t flags;     /* enum arch_flag */
    uint8_t load;      /* enum arch_load */
    uint8_t nd;
    uint8_t ne[4];     /* enum arch_dim; AD_1 past nd */
    size_t slot;       /* offsetof of its weight in the group's struct */
};

/* ------------------------------------------------------------------- text */

/* The text keys of an architecture (static strings: the assumption list
 * keeps the pointers); NULL: the family has no such key. */
struct arch_text_keys {
    const char *embd, *blocks, *ff, *heads, *heads_kv, *ctx, *theta, *eps, *key_len, *val_len,
        *rot, *sections, *deepstack;
};

struct arch_text {
    const char *name;          /* general.architecture: the family's identity */
    const char *display;       /* "Qwen2-VL / Qwen2.5-VL", for messages */
    struct arch_text_keys keys;
    /* the head size is attention.key_length, not embedding_length / head_count */
    int own_head_dim;
    const struct arch_tensor *tensors;
    uint32_t n_tensors;
    int rope_mode;             /* enum op_rope_mode of the decoder */
    /* The chat template has no default system turn. */
    int prompt_no_system;
    /* A variant of this architecture folio refuses by name (NULL: none),
     * with the message (one %s: the path) and the hint. */
    const char *refused, *refused_msg, *refused_hint;

    /* ---- decoder hooks (lm.c, lm_forward.c); NULL: none ---- */
    /* Pipelines the family's hooks add (<= 8). */
    int (*hook_keys)(struct vkr_pipeline_key *out);
    /* At lm_open once the plan is made (and again at a re-plan): the
     * family's own state and device tensors; hook_close undoes it (also
     * after a failed or absent open). */
    int (*hook_open)(struct lm *lm, struct folio_err *err);
    void (*hook_close)(struct lm *lm);
    /* Host side of a pass (first device current): uploads what the
     * family's layers need besides the rows. */
    int (*hook_stage)(struct lm *lm, const struct lm_seq *seqs, uint32_t nseq, int prefill,
                    struct folio_err *err);
    /* Between the q/k projections and RoPE: q is nq rows x n_head heads, k
     * nk rows x n_head_kv (the last layer of a pass may project q for
     * fewer rows than k: lm_forward.c's tail). */
    int (*hook_qk)(struct lm *lm, struct vkr_cmd *c, const struct lm_layer *L, struct vkr_tensor q,
                 uint32_t nq, struct vkr_tensor k, uint32_t nk, struct folio_err *err);
    /* After decoder layer `layer` on the residual stream x. Not called
     * after the last layer of a pass that computes it for the rows it
     * reads alone (lm_forward.c's tail): a family whose hook can change
     * the last layer's output sets lm->full_tail in hook_open. */
    int (*hook_layer_done)(struct lm *lm, struct vkr_cmd *c, uint32_t layer, uint32_t nrows,
                         struct folio_err *err);

    /* `folio doctor`: the family's own line before the hyper-parameters
     * (NULL: none). */
    void (*describe)(FILE *out, const struct gguf_text_hparams *h);
};

/* ------------------------------------------------------------------ tower */

struct arch_tower {
    const char *projector[3];  /* clip projector types it answers to (NULL-padded) */
    const char *display;       /* "Qwen2.5-VL" */
    const char *json_name;     /* "qwen2.5vl": the tower's identity */
    const char *mlp_name;      /* "swiglu", "gelu", "quick-gelu" */
    const char *const *keys;   /* the tower's own keys besides the shared clip ones, NULL-ended */
    /* After the shared clip keys: the family's keys and fixed choices. */
    int (*hparams)(struct model_check *c);
    /* Widths the metadata does not give, from the tensors' shapes (before
     * the table is walked). */
    int (*shapes)(struct model_check *c);
    const struct arch_tensor *tensors;
    uint32_t n_tensors;
    const struct vis_family *tower; /* its blocks and merger (tower_internal.h) */
    int norm_kind;             /* op_norm kind of every norm: 0 RMSNorm, 1 LayerNorm */
    int act;                   /* enum op_elem_kind of the MLP */
    int prompt_no_system;      /* as arch_text's */
    /* The preprocessing the tower was trained with (NULL: prep_config
     * defaults, 14-px patches). cfg_min / cfg_max: the configuration's
     * pixel bounds (0 = the family's defaults); max_image_tokens: the plan. */
    void (*pixels)(const struct gguf_vision_hparams *h, uint32_t cfg_min, uint32_t cfg_max,
                   uint32_t max_image_tokens, struct prep_config *prep);
    /* `folio doctor`: the family's own line after the hyper-parameters. */
    void (*describe)(FILE *out, const struct gguf_vision_hparams *h);
};

/* ---------------------------------------------------------------- registry */

/* The family whose general.architecture is name[0..n), or NULL. */
const struct arch_text *arch_text_find(const char *name, size_t n);
/* The family that refuses name[0..n) by name (arch_text.refused), or NULL. */
const struct arch_text *arch_text_refusing(const char *name, size_t n);
/* The tower whose projector type is name[0..n), or NULL. */
const struct arch_tower *arch_tower_find(const char *name, size_t n);
/* The i-th family (NULL past the last): for key lists and messages. */
const struct arch_text *arch_text_at(uint32_t i);
const struct arch_tower *arch_tower_at(uint32_t i);

/* In a text family's table: the token embedding (the entry flagged
 * ARCH_HOST_UNLESS_TIED) and the LM head (the POST entry that fills the
 * embedding's slot when the file has one; tied files have none). The
 * generic check reads the vocabulary and the tying off them. */
const struct arch_tensor *arch_text_embedding(const struct arch_text *A);
const struct arch_tensor *arch_text_head(const struct arch_text *A);

/* What folio runs, for messages, into out[0..n) (cut to fit):
 * ARCH_LIST_TEXT "Qwen2-VL / Qwen2.5-VL (architecture qwen2vl), dense
 * Qwen3-VL (architecture qwen3vl)", ARCH_LIST_TOWERS "qwen2vl_merger
 * (Qwen2-VL), ...", ARCH_LIST_NAMES "Qwen2-VL, Qwen2.5-VL, Qwen3-VL". */
enum arch_list { ARCH_LIST_TEXT, ARCH_LIST_TOWERS, ARCH_LIST_NAMES };
const char *arch_list(enum arch_list what, char *out, size_t n);

#endif
