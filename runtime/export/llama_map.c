#include "llama_map.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *tlm_export_refusal(const tlm_so *so, char *buf, size_t n) {
    const tlm_abi_config *c = so->config;
    switch ((tlm_mixer)c->mixer) {
    case TLM_MIXER_ATTENTION: break;
    case TLM_MIXER_GATED_ATTENTION:
        snprintf(buf, n, "its mixer is Gated Attention: llama.cpp's attention has no sigmoid output gate");
        return buf;
    case TLM_MIXER_TITANS:
        snprintf(buf, n, "its mixer is Titans: llama.cpp has no memory updated by gradient descent at test time");
        return buf;
    case TLM_MIXER_HOPE_ATTENTION:
        snprintf(buf, n, "its mixer is Hope-attention: llama.cpp has no continuum of MLP memories (CMS levels)");
        return buf;
    default: snprintf(buf, n, "its mixer (%u) is unknown", c->mixer); return buf;
    }
    if (c->mlp != TLM_MLP_SWIGLU) {
        snprintf(buf, n, "its MLP is %s: llama.cpp's llama and deci architectures run SwiGLU MLPs only",
                 tlm_enum_title(&tlm_mlp_enum, c->mlp));
        return buf;
    }
    if (c->vocab != 256) {
        snprintf(buf, n, "its vocabulary has %lld tokens: the byte-level export needs exactly 256 (one per byte)",
                 (long long)c->vocab);
        return buf;
    }
    if (c->head_dim % 2) {
        snprintf(buf, n, "its head size %lld is odd: RoPE pairs need an even one", (long long)c->head_dim);
        return buf;
    }
    return NULL;
}

/* llama.cpp's name for parameter p, or NULL. */
static const char *gguf_name(const tlm_abi_param *p, char *buf, size_t n) {
    static const char *const names[TLM_P_COUNT] = {
        [TLM_P_EMBED] = "token_embd",
        [TLM_P_ATTN_NORM] = "attn_norm",
        [TLM_P_Q] = "attn_q",
        [TLM_P_K] = "attn_k",
        [TLM_P_V] = "attn_v",
        [TLM_P_O] = "attn_output",
        [TLM_P_MLP_NORM] = "ffn_norm",
        [TLM_P_GATE] = "ffn_gate",
        [TLM_P_UP] = "ffn_up",
        [TLM_P_DOWN] = "ffn_down",
        [TLM_P_FINAL_NORM] = "output_norm",
        [TLM_P_HEAD] = "output",
    };
    const char *s = p->role < TLM_P_COUNT ? names[p->role] : NULL;
    if (!s) return NULL;
    if (p->layer < 0) snprintf(buf, n, "%s.weight", s);
    else snprintf(buf, n, "blk.%d.%s.weight", p->layer, s);
    return buf;
}

/* convert_hf_to_gguf.py's LlamaModel.permute: Hugging Face's RoPE rotates
 * element i of a head with element i + D/2 (rotate_half), llama.cpp's
 * (LLAMA_ROPE_TYPE_NORM) element 2j with 2j + 1, so row s * D/2 + j of
 * each head's block of q_proj and k_proj becomes row 2j + s. */
static void permute_rope(float *out, const float *w, int64_t heads, int64_t D, int64_t cols) {
    for (int64_t h = 0; h < heads; h++)
        for (int64_t s = 0; s < 2; s++)
            for (int64_t j = 0; j < D / 2; j++)
                memcpy(out + (h * D + 2 * j + s) * cols, w + (h * D + s * (D / 2) + j) * cols,
                       (size_t)cols * sizeof *w);
}

/* The type parameter p is stored as when `type` is asked for: norms stay
 * F32, and a q8_0 matrix whose rows (its columns) are not whole blocks of
 * 32 stays F16. */
static enum tlm_ggml_type stored_type(const tlm_abi_param *p, enum tlm_ggml_type type) {
    int64_t cols = p->ndim == 2 ? p->shape[1] : p->shape[0];
    if (p->ndim == 1) return TLM_GGML_F32;
    return type == TLM_GGML_Q8_0 && cols % TLM_Q8_0_BLOCK ? TLM_GGML_F16 : type;
}

static bool add_param(const tlm_so *so, const tlm_abi_param *p, const float *params, enum tlm_ggml_type type,
                      tlm_gguf *g, tlm_strbuf *kept) {
    char name[96];
    if (!gguf_name(p, name, sizeof name)) return false;
    const float *w = params + p->offset;
    float *permuted = NULL;
    int64_t rows = p->ndim == 2 ? p->shape[0] : 1, cols = p->ndim == 2 ? p->shape[1] : p->shape[0];
    if (p->role == TLM_P_Q || p->role == TLM_P_K) {
        if (!(permuted = malloc((size_t)p->count * sizeof *permuted))) return false;
        permute_rope(permuted, w, so->config->heads, so->config->head_dim, cols);
        w = permuted;
    }
    enum tlm_ggml_type t = stored_type(p, type);
    if (kept && type == TLM_GGML_Q8_0 && p->ndim == 2 && t == TLM_GGML_F16)
        tlm_sb_printf(kept, "%s%s", kept->len ? ", " : "", name);
    size_t nbytes = tlm_ggml_nbytes(t, (size_t)p->count);
    uint8_t *data = malloc(nbytes ? nbytes : 1);
    if (data) tlm_ggml_encode(t, w, (size_t)p->count, data);
    free(permuted);
    int64_t ne[2] = {cols, rows};
    tlm_gguf_add_tensor(g, name, p->ndim, ne, t, data, nbytes);
    return !g->oom;
}

const char *tlm_export_unrepresentable(const tlm_so *so, const float *params, enum tlm_ggml_type type, char *buf,
                                       size_t n) {
    for (uint32_t i = 0; i < so->nparams; i++) {
        const tlm_abi_param *p = &so->params[i];
        enum tlm_ggml_type t = stored_type(p, type);
        if (tlm_ggml_holds(t, params + p->offset, (size_t)p->count)) continue;
        char name[96];
        const char *shown = gguf_name(p, name, sizeof name) ? name : tlm_so_str(so, p->name);
        const float *w = params + p->offset;
        bool finite = true;
        float amax = 0;
        for (int64_t j = 0; j < p->count; j++) finite = finite && isfinite(w[j]), amax = fmaxf(amax, fabsf(w[j]));
        if (!finite) snprintf(buf, n, "%s holds NaN or infinite weights (did the run diverge?)", shown);
        else /* f16 or q8_0: f32 holds every finite float */
            snprintf(buf, n, "%s has weights up to %.3g, beyond %s (did the run diverge? --type f32 keeps them)", shown,
                     (double)amax, t == TLM_GGML_F16 ? "float16's 65504" : "what q8_0's float16 scale holds");
        return buf;
    }
    return NULL;
}

bool tlm_export_llama(const tlm_so *so, const float *params, enum tlm_ggml_type type, int64_t context, tlm_gguf *g,
                      tlm_strbuf *kept_f16) {
    const tlm_abi_config *c = so->config;
    const int L = (int)c->layers;
    bool uniform = true;
    for (int l = 1; l < L; l++) uniform &= so->layers[l].width == so->layers[0].width;
    const char *arch = uniform ? "llama" : "deci";
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, arch), key)
    tlm_gguf_set_str(g, "general.architecture", arch);
    tlm_gguf_set_str(g, "general.name", tlm_so_str(so, c->name));
    /* q8_0 asked for, and no matrix has whole blocks: the file is F16 */
    bool any_q8 = false;
    for (uint32_t i = 0; i < so->nparams; i++) any_q8 |= stored_type(&so->params[i], type) == TLM_GGML_Q8_0;
    tlm_gguf_set_u32(g, "general.file_type", type == TLM_GGML_F32 ? 0 : any_q8 ? 7 : 1);
    if (any_q8) tlm_gguf_set_u32(g, "general.quantization_version", 2);
    tlm_gguf_set_u32(g, "general.alignment", TLM_GGUF_ALIGN);
    tlm_gguf_set_u32(g, KEY("vocab_size"), (uint32_t)c->vocab);
    tlm_gguf_set_u32(g, KEY("context_length"), (uint32_t)context);
    tlm_gguf_set_u32(g, KEY("embedding_length"), (uint32_t)c->d_model);
    tlm_gguf_set_u32(g, KEY("block_count"), (uint32_t)L);
    int32_t *per_layer = malloc((size_t)L * sizeof *per_layer);
    if (!per_layer) return false;
    if (uniform) {
        tlm_gguf_set_u32(g, KEY("feed_forward_length"), (uint32_t)so->layers[0].width);
        tlm_gguf_set_u32(g, KEY("attention.head_count"), (uint32_t)c->heads);
        tlm_gguf_set_u32(g, KEY("attention.head_count_kv"), (uint32_t)c->heads);
    } else {
        for (int l = 0; l < L; l++) per_layer[l] = (int32_t)so->layers[l].width;
        tlm_gguf_set_arr_i32(g, KEY("feed_forward_length"), per_layer, (size_t)L);
        for (int l = 0; l < L; l++) per_layer[l] = (int32_t)c->heads;
        tlm_gguf_set_arr_i32(g, KEY("attention.head_count"), per_layer, (size_t)L);
        tlm_gguf_set_arr_i32(g, KEY("attention.head_count_kv"), per_layer, (size_t)L);
    }
    free(per_layer);
    tlm_gguf_set_u32(g, KEY("attention.key_length"), (uint32_t)c->head_dim);
    tlm_gguf_set_u32(g, KEY("attention.value_length"), (uint32_t)c->head_dim);
    tlm_gguf_set_f32(g, KEY("attention.layer_norm_rms_epsilon"), (float)c->norm_eps);
    tlm_gguf_set_f32(g, KEY("rope.freq_base"), (float)c->rope_base);
    tlm_gguf_set_u32(g, KEY("rope.dimension_count"), (uint32_t)c->head_dim);
#undef KEY
    tlm_export_byte_vocab(g);
    for (uint32_t i = 0; i < so->nparams; i++)
        if (!add_param(so, &so->params[i], params, type, g, kept_f16)) return false;
    return !g->oom && !(kept_f16 && kept_f16->oom);
}
