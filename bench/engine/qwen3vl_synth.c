/*
 * The shapes of the Qwen3-VL synthetic models (qwen3vl.h describes the
 * family): the 8B's text decoder and tower, or small ones for CI.
 */
#include "bench/engine/synth.h"

void q3_synth_shapes(int small, struct lm_synth *ls, struct vis_synth *vs)
{
    if (ls) {
        ls->qwen3 = 1;
        ls->n_embd = small ? 256 : 4096;
        ls->n_layer = small ? 2 : 36;
        ls->n_head = small ? 4 : 32;
        ls->n_head_kv = small ? 2 : 8;
        ls->head_dim = small ? 64 : 128;
        ls->n_ff = small ? 512 : 12288;
        ls->n_vocab = small ? 1024 : 151936;
        ls->n_deepstack = small ? 1 : 3;
        ls->tied = 0;
    }
    if (vs) {
        vs->qwen3 = 1;
        vs->qwen25 = 0;
        vs->n_embd = small ? 128 : 1152;
        vs->n_layer = small ? 4 : 27;
        vs->n_head = small ? 2 : 16;
        vs->n_ff = small ? 256 : 4304;
        vs->proj_dim = small ? 256 : 4096;
        vs->pos_side = small ? 8 : 48;
        vs->n_deepstack = small ? 1 : 3;
        vs->deepstack[0] = small ? 1 : 8;
        vs->deepstack[1] = 16;
        vs->deepstack[2] = 24;
    }
}
