/* A tlm model as llama.cpp's `deci` architecture (DeciLM / Nemotron-NAS:
 * Llama blocks whose MLP width and head counts are one value per layer),
 * or `llama` when every layer has the same width: the metadata, the
 * tensors under llama.cpp's names with Q and K permuted into its RoPE
 * layout, and the byte-level vocabulary (byte_vocab.c). docs/export.md
 * has the whole mapping. */
#ifndef TLM_EXPORT_LLAMA_MAP_H
#define TLM_EXPORT_LLAMA_MAP_H

#include <stdbool.h>
#include <stddef.h>

#include "gguf.h"
#include "model_so.h"
#include "quant.h"
#include "tlm_rt/json.h"

/* NULL when llama.cpp can run the model; otherwise a one-line reason
 * naming what it lacks (a mixer, an MLP kind, a vocabulary), in buf. */
const char *tlm_export_refusal(const tlm_so *so, char *buf, size_t n);

/* NULL when every weight fits the type it is stored in under `type`
 * (tlm_ggml_holds); otherwise a one-line reason naming the first tensor
 * that does not (NaN or infinite weights, or beyond float16), in buf. */
const char *tlm_export_unrepresentable(const tlm_so *so, const float *params, enum tlm_ggml_type type, char *buf,
                                       size_t n);

/* Fills g from the model's parameter block (params: so->config->param_floats
 * floats) with the matrices in `type` and context_length `context` (the
 * window the weights were trained on); a matrix whose rows are not a
 * multiple of 32 stays f16 under q8_0, and its name is appended to kept_f16
 * (", "-separated; NULL: not reported). The vectors (norms) stay f32.
 * False when out of memory. Call tlm_export_refusal and
 * tlm_export_unrepresentable first. */
bool tlm_export_llama(const tlm_so *so, const float *params, enum tlm_ggml_type type, int64_t context, tlm_gguf *g,
                      tlm_strbuf *kept_f16);

/* The byte-level vocabulary (byte_vocab.c): 256 tokens, token i is byte i,
 * written in GPT-2's byte-to-unicode characters, as a `gpt2` BPE tokenizer
 * without merges; nothing added around a text (no BOS, no EOS). */
void tlm_export_byte_vocab(tlm_gguf *g);

#endif
