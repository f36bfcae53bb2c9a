/* The FLOPs of training one token, the numerator of MFU (docs/gpu.md):
 *
 *   6 N  +  mixer term
 *
 * N counts every matrix weight a token multiplies: all 2-D parameters but
 * the embedding table (a lookup), which counts once more as the head when
 * tied; hope_attention's CMS levels are MLPs and count in N. 6 = 2
 * (multiply and add) × 3 (forward, and the backward's two
 * products). The mixer term, per layer and token, for context T, A =
 * heads·head_dim:
 *   attention (transformer, gated, hope):  12 A T   (QK^T and PV, 2·2·A·T
 *       forward, × 3; the causal mask's unused half counted, as PaLM and
 *       llm.c count it, so that MFU compares across tools)
 *   titans: 24 H hd²   (per head M k, the momentum update, the memory
 *       update and M q, 2·hd² each, × 3)
 * Elementwise work (norms, activations, gates, softmax) is not counted. */
#ifndef TLM_FLOPS_H
#define TLM_FLOPS_H

#include <stdint.h>

#include "model_so.h"

double tlm_train_flops_per_token(const tlm_so *so, int64_t T);

#endif
