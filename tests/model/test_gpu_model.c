/* Whole models on the emulated device against the CPU runtime (fp32, and
 * bf16 with bounds of its own, see bf16_model): for
 * each model.so given, the same parameters and batch through both
 * executors, then the loss, every gradient, and the parameters after a few
 * optimizer steps (AdamW, clipping, the model's schedule; hope_attention's
 * slow CMS levels included) compared element by element.
 *
 * Bound: |gpu - cpu| <= REL |cpu| + ABS_FLOOR max|tensor| per element, per
 * tensor. The two sides differ only in summation order (OpenBLAS's GEMMs
 * and the CPU ops' loops against the emulated device's plain GEMM and the
 * kernels' block reductions), so the difference is a few float32 roundings
 * of the largest terms summed: ~1e-7 of the tensor's scale per rounding.
 * The floor is relative to the tensor's largest element because a small
 * element of a sum is the difference of large terms and carries their
 * rounding. The loss: |gpu - cpu| <= REL |cpu|.
 *
 * The optimizer steps use AdamW with eps = 1e-3 instead of 1e-8: with a
 * tiny eps the first update is lr sign(g) for every element, so an element
 * whose gradient is rounding noise (~1e-9) moves by a whole lr one way on
 * one side and the other way on the other. A larger eps keeps the update a
 * smooth function of the gradient, so the comparison tests the device's
 * optimizer path rather than the conditioning of Adam at eps 1e-8 (gpu.optim
 * checks the update kernels themselves bit for bit).
 *
 * The emulated device is selected by TLM_TEST_DEVICE=emulated (ctest sets
 * it); without it the test opens a real GPU when there is one.
 *
 * usage: test_gpu_model MODEL.so... */
#include "gemm_reference.h"
#include "gpu_model.h"
#include "model_util.h"
#include "tlm_train_settings.h"
#include "trainer.h"

static const double REL = 1e-5;
static const double ABS_FLOOR = 1e-5;
enum { B = 2, STEPS = 3 };

typedef struct worst {
    double ratio;  /* the largest |diff| / bound seen: <= 1 passes */
    double diff;
} worst;

/* Compares one tensor; returns the worst |diff| / bound. */
static double compare(const char *what, const char *name, const float *cpu, const float *gpu, int64_t n) {
    double scale = 0;
    for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs((double)cpu[i]));
    double ratio = 0;
    int64_t at = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)gpu[i] - (double)cpu[i]);
        double bound = REL * fabs((double)cpu[i]) + ABS_FLOOR * scale;
        double r = bound > 0 ? d / bound : (d > 0 ? INFINITY : 0);
        if (!(r <= ratio)) ratio = r, at = i;  /* NaN counts as worst */
    }
    CHECK(ratio <= 1.0, "%s %s[%lld]: gpu %.9g cpu %.9g (%.2f of the bound)", what, name, (long long)at, gpu[at],
          cpu[at], ratio);
    return ratio;
}

/* bf16 (the device's default) from the same parameters and batch: the
 * loss within loss_bound and BF16_LOSS_MEASURED of the CPU's fp32 loss,
 * relative, and each
 * gradient within BF16_GRAD of the CPU's in norm, relative:
 * ||g_bf16 - g_cpu|| <= BF16_GRAD ||g_cpu||. Rounding a GEMM operand to
 * bf16 perturbs it by at most u = 2^-8 relative; a gradient is a chain of
 * a few GEMMs per layer, so its first-order error is a few u in the worst
 * case and, the roundings being independent, far less in norm. The
 * gradients' bound, 8u = 2^-5, leaves room for the odd sizes; docs/gpu.md
 * gives the measured values. The loss's bound follows from the logits'
 * (loss_bound, below), and the device's loss is checked against the
 * cross-entropy of the very logits it read (cross_entropy, in double),
 * which leaves no room at all for the loss op; as that bound is loose, a
 * measured guard (BF16_LOSS_MEASURED) watches for drift inside it. Titans'
 * gradients get
 * 16u = 2^-4 (BF16_GRAD_TITANS): its mixer stores twice the roundings of
 * attention's on the path of every gradient through a layer (before the
 * memory qkv at the GEMM, the activation and the memory's q, k, v; after
 * it the read-out, the normalised read-out, gate_pre and the gated output;
 * against attention's q, k twice and y once), and the memory's gradients of theta
 * and alpha are sums that cancel (e_t . u_t, Frobenius products), which
 * carry a rounding of their terms at the terms' size. So do softmax
 * attention's q and k projections' (BF16_GRAD_QK = 16u): they reach q and k
 * only through dS = P (dP - D_t), the difference of dP and its P-weighted
 * mean D_t, whose roundings (dy, v and y in bf16, and P on the tensor
 * cores) stay at the size of dP while the difference is smaller: 0.033 to
 * 0.037 at head size 128 (heads128, scalar and tensor-core kernels alike),
 * at most 0.018 at 64.
 *
 * The activations: every normalised input of the model (norm1, norm2, the
 * final norm: only GEMMs read them) and the MLPs' pre-activations are
 * stored in bf16, and so are every mixer's qkv (softmax attention's and
 * Titans', which its memory activation reads in bf16), attention's output,
 * the gate pre-activation and gated output (the sigmoid gate's and Titans'
 * SiLU gate's bf16 kernels), Titans' activation, its memory's q, k, v, its
 * read-out (the per-head norm's x) and the normalised read-out (the SiLU
 * gate's x), and the logits with their gradient (one buffer: the loss's
 * backward writes dlogits over them). The residual stream, which probe
 * reads by role, is not; neither are Titans' saved states, norms and
 * gates, nor any gradient but
 * dlogits; and the arena is smaller than the fp32 one by at least the final
 * norm's half.
 *
 * The logits that eval and sample read on the host (tlm_model_logits) are
 * the device's bf16 values widened: bit for bit the bf16 bits the arena
 * holds, after a whole forward and after a shorter one (a prefix; an odd
 * count of elements for odd_sizes), and within LOGITS_BF16 of the CPU's
 * fp32 logits, relative in norm: a GEMM of rounded operands whose inputs
 * carry the layers' roundings (first order, as for the gradients), then
 * one rounding of its own (u). */
/* BF16_LOSS_MEASURED is not derived: a regression guard at about twice the
 * largest distance measured (4.8e-4 on the emulated device, 1.05e-3 on an
 * H100, both heads128), below the derived bound (loss_bound), which holds
 * whenever the logits and the loss op pass and so cannot catch a loss that
 * drifts within it. */
static const double BF16_LOSS_MEASURED = 1.0 / 512;
static const double BF16_GRAD = 1.0 / 32, BF16_GRAD_TITANS = 1.0 / 16, BF16_GRAD_QK = 1.0 / 16, LOGITS_BF16 = 1.0 / 32;

/* log sum_i exp(row[i]) over a row of V logits, in double */
static double log_sum_exp(const float *row, int64_t V) {
    double top = row[0], s = 0;
    for (int64_t i = 1; i < V; i++) top = fmax(top, row[i]);
    for (int64_t i = 0; i < V; i++) s += exp((double)row[i] - top);
    return top + log(s);
}

/* The mean cross-entropy of the logits z [n, V] at the targets other
 * than -1, in double: what the loss op computes. */
static double cross_entropy(const float *z, const int32_t *targets, int64_t n, int64_t V) {
    double sum = 0;
    int64_t counted = 0;
    for (int64_t t = 0; t < n; t++) {
        if (targets[t] < 0) continue;
        sum += log_sum_exp(z + t * V, V) - z[t * V + targets[t]];
        counted++;
    }
    return counted ? sum / (double)counted : 0;
}

/* How far the mean cross-entropy over the N counted tokens can move when
 * the logits z [n, V] move by any delta with ||delta|| <= eps ||z||.
 * Per token, CE(z + d) - CE(z) = (p - e_y) . d + r with |r| <= ||d||^2 / 4
 * (the Hessian of log-sum-exp, diag(p) - p p^T, has no eigenvalue above
 * 1/2), so by Cauchy-Schwarz over the tokens
 *   |dloss| <= (sqrt(sum_t ||p_t - e_yt||^2) eps ||z|| + eps^2 ||z||^2 / 4) / N.
 * This is what the logits' bound allows the loss; the bound is reached
 * only when every token's rounding error points along p_t - e_yt. */
static double loss_bound(const float *z, const int32_t *targets, int64_t n, int64_t V, double eps) {
    double a2 = 0, z2 = 0;
    int64_t counted = 0;
    for (int64_t t = 0; t < n; t++) {
        const float *row = z + t * V;
        for (int64_t i = 0; i < V; i++) z2 += (double)row[i] * row[i];
        if (targets[t] < 0) continue;
        const double lse = log_sum_exp(row, V);
        for (int64_t i = 0; i < V; i++) {
            const double g = exp((double)row[i] - lse) - (i == targets[t]); /* p_i - [i = y] */
            a2 += g * g;
        }
        counted++;
    }
    const double dz = eps * sqrt(z2);
    return counted ? (sqrt(a2) * dz + dz * dz / 4) / (double)counted : 0;
}

/* The bf16 logits of g's last forward of n elements: tlm_model_logits
 * (widened on the host) against the bits in the device arena, which must
 * be the widened values' upper halves with zero lower halves. The relative
 * difference in norm from cpu_logits (NULL: skipped) is returned. */
static double logits_widened(tlm_model *g, const char *model, const float *cpu_logits, int64_t n) {
    int32_t b = -1;
    for (uint32_t i = 0; i < g->so->header->nbuffers; i++)
        if (g->so->buffers[i].role == TLM_B_LOGITS) b = (int32_t)i;
    uint16_t *raw = xcalloc((size_t)n, 2);
    tlm_err err = {""};
    CHECK(b >= 0 &&
              tlm_device_download(g->gpu->gpu.dev, raw, g->gpu->arena + (tlm_dptr)g->offsets[b], (size_t)n * 2, &err),
          "%s: the logits' bits: %s", model, err.msg);
    const float *host = tlm_model_logits(g);
    int64_t off = 0;
    double num = 0, den = 0;
    for (int64_t i = 0; host && i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &host[i], 4);
        off += bits != (uint32_t)raw[i] << 16;
        if (cpu_logits)
            num += ((double)host[i] - cpu_logits[i]) * ((double)host[i] - cpu_logits[i]),
                den += (double)cpu_logits[i] * cpu_logits[i];
    }
    CHECK(host && off == 0, "%s bf16: %lld of %lld host logits are not the device's bf16 widened", model,
          (long long)off, (long long)n);
    free(raw);
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* The MLP activation kernels' bf16 twins (codegen/cuda_source.c) against
 * the fp32 kernels on the same values: pre-activations that are bf16 (so
 * both read the same numbers), then act_bf16's h must be the fp32 act's h
 * rounded to nearest even, and act_grad_bf16's gradients (bf16 too) the
 * fp32 act_grad's rounded, bit for bit. The fp32 kernels are held to the
 * CPU by the whole-model comparison above, so the twins differ from the CPU
 * by one rounding of what they write (u = 2^-8 relative) and nothing else. */
static void act_twins(const tlm_model *g, const char *model) {
    tlm_device *dev = g->gpu->gpu.dev;
    const long long rows = 5; /* odd: the last block is partial */
    tlm_err err = {""};
    for (uint32_t k = 0; k < g->so->header->nkernels; k++) {
        const int64_t n = rows * g->so->kernels[k].width;
        uint16_t *pre16 = xcalloc((size_t)(2 * n), 2), *h16 = xcalloc((size_t)n, 2);
        float *pre = xcalloc((size_t)(2 * n), 4), *dh = xcalloc((size_t)n, 4), *h = xcalloc((size_t)n, 4);
        float *grads = xcalloc((size_t)(2 * n), 4);
        uint16_t *grads16 = xcalloc((size_t)(2 * n), 2);
        tlm_rng rng;
        tlm_rng_seed(&rng, 5 + k);
        for (int64_t i = 0; i < 2 * n; i++) {
            pre16[i] = tlm_f32_to_bf16((float)(6 * tlm_rng_uniform(&rng) - 3));
            pre[i] = tlm_bf16_to_f32(pre16[i]);
        }
        for (int64_t i = 0; i < n; i++) dh[i] = (float)(2 * tlm_rng_uniform(&rng) - 1);
        tlm_dptr d_pre = tlm_device_alloc(dev, (size_t)(2 * n) * 4, &err);
        tlm_dptr d_pre16 = tlm_device_alloc(dev, (size_t)(2 * n) * 2, &err);
        tlm_dptr d_dh = tlm_device_alloc(dev, (size_t)n * 4, &err), d_h = tlm_device_alloc(dev, (size_t)n * 4, &err);
        tlm_dptr d_h16 = tlm_device_alloc(dev, (size_t)n * 2, &err);
        tlm_dptr d_grads = tlm_device_alloc(dev, (size_t)(2 * n) * 4, &err);
        tlm_dptr d_grads16 = tlm_device_alloc(dev, (size_t)(2 * n) * 2, &err);
        CHECK(d_pre && d_pre16 && d_dh && d_h && d_h16 && d_grads && d_grads16, "%s: %s", model, err.msg);
        tlm_device_upload(dev, d_pre, pre, (size_t)(2 * n) * 4, &err);
        tlm_device_upload(dev, d_pre16, pre16, (size_t)(2 * n) * 2, &err);
        tlm_device_upload(dev, d_dh, dh, (size_t)n * 4, &err);
        tlm_dptr pg = d_pre, pu = d_pre + (tlm_dptr)n * 4, pg16 = d_pre16, pu16 = d_pre16 + (tlm_dptr)n * 2;
        tlm_dptr dg = d_grads, du = d_grads + (tlm_dptr)n * 4, dg16 = d_grads16, du16 = d_grads16 + (tlm_dptr)n * 2;
        void *act[] = {(void *)&rows, &pg, &pu, &d_h}, *act16[] = {(void *)&rows, &pg16, &pu16, &d_h16};
        void *grad[] = {(void *)&rows, &pg, &pu, &d_dh, &dg, &du};
        void *grad16[] = {(void *)&rows, &pg16, &pu16, &d_dh, &dg16, &du16};
        tlm_launch dims = {.grid = {3, 1, 1}, .block = {256, 1, 1}};
        bool ok = tlm_device_launch(dev, g->gpu->act[k], dims, act, &err) &&
                  tlm_device_launch(dev, g->gpu->act_bf16[k], dims, act16, &err) &&
                  tlm_device_launch(dev, g->gpu->act_grad[k], dims, grad, &err) &&
                  tlm_device_launch(dev, g->gpu->act_grad_bf16[k], dims, grad16, &err) &&
                  tlm_device_download(dev, h, d_h, (size_t)n * 4, &err) &&
                  tlm_device_download(dev, h16, d_h16, (size_t)n * 2, &err) &&
                  tlm_device_download(dev, grads, d_grads, (size_t)(2 * n) * 4, &err) &&
                  tlm_device_download(dev, grads16, d_grads16, (size_t)(2 * n) * 2, &err);
        CHECK(ok, "%s: the activation kernels: %s", model, err.msg);
        int64_t h_off = 0;
        for (int64_t i = 0; i < n; i++) h_off += h16[i] != tlm_f32_to_bf16(h[i]);
        CHECK(h_off == 0, "%s kernel %u: %lld of %lld bf16 h are not the fp32 h rounded", model, k, (long long)h_off,
              (long long)n);
        int64_t grad_off = 0;
        for (int64_t i = 0; i < 2 * n; i++) grad_off += grads16[i] != tlm_f32_to_bf16(grads[i]);
        CHECK(grad_off == 0, "%s kernel %u: %lld of %lld act_grad_bf16 gradients are not act_grad's rounded", model, k,
              (long long)grad_off, (long long)(2 * n));
        tlm_dptr all[] = {d_pre, d_pre16, d_dh, d_h, d_h16, d_grads, d_grads16};
        for (size_t i = 0; i < sizeof all / sizeof *all; i++) tlm_device_free(dev, all[i]);
        free(pre16), free(h16), free(pre), free(dh), free(h), free(grads), free(grads16);
    }
}

/* TLM_GPU_ATTENTION: scalar keeps a tensor-core model on the scalar
 * kernels (with the accumulator they need); another value is refused with
 * one line naming it. */
static void attention_switch(const tlm_so *so, tlm_device *dev, int64_t T) {
    const char *model = tlm_so_str(so, so->config->name);
    tlm_model g;
    tlm_err err = {""};
    setenv("TLM_GPU_ATTENTION", "scalar", 1);
    if (tlm_model_create_on(&g, so, dev, TLM_PRECISION_BF16, B, T, true, 0, &err)) {
        CHECK(!g.gpu->attention_tc && g.gpu->attention_scratch, "%s: TLM_GPU_ATTENTION=scalar left the tensor cores on",
              model);
        tlm_model_destroy(&g);
    } else {
        CHECK(false, "%s: TLM_GPU_ATTENTION=scalar: %s", model, err.msg);
    }
    setenv("TLM_GPU_ATTENTION", "tensor", 1);
    bool made = tlm_model_create_on(&g, so, dev, TLM_PRECISION_BF16, B, T, true, 0, &err);
    CHECK(!made && strstr(err.msg, "TLM_GPU_ATTENTION=tensor: expected auto or scalar") && !strchr(err.msg, '\n'),
          "%s: TLM_GPU_ATTENTION=tensor: %s", model, made ? "accepted" : err.msg);
    if (made) tlm_model_destroy(&g);
    unsetenv("TLM_GPU_ATTENTION");
}

/* The rule's pair: the cross-entropy's backward reads the logits and writes
 * dlogits in one storage. The IR writes dlogits over the logits; given an
 * op list whose loss backward writes another buffer instead (d_norm, which
 * no bf16 op writes), the rule must keep the logits fp32 too, since no
 * kernel reads bf16 logits and writes an fp32 gradient. */
static void dlogits_apart(const tlm_so *so, const char *model) {
    tlm_so apart = *so;
    const uint32_t nb = so->header->nbuffers, nops = so->header->nops;
    tlm_abi_op *ops = xcalloc(nops, sizeof *ops);
    memcpy(ops, so->ops, nops * sizeof *ops);
    int32_t d_norm = -1, logits = -1;
    for (uint32_t i = 0; i < nb; i++) {
        if (so->buffers[i].role == TLM_B_D_NORM) d_norm = (int32_t)i;
        if (so->buffers[i].role == TLM_B_LOGITS) logits = (int32_t)i;
    }
    for (uint32_t k = 0; k < nops; k++)
        if (ops[k].kind == TLM_OP_LOSS_BACKWARD) ops[k].loss_backward.out_dlogits = d_norm;
    apart.ops = ops;
    bool *bf16 = xcalloc(nb + 1, sizeof *bf16);
    tlm_gpu_bf16_buffers(&apart, (int)nops, bf16);
    CHECK(d_norm >= 0 && logits >= 0 && !bf16[logits] && !bf16[d_norm],
          "%s: with dlogits apart from the logits, the logits are stored in %s", model, bf16[logits] ? "bf16" : "fp32");
    free(bf16);
    free(ops);
}

/* The rule's four: an MLP's activation gradient reads its pre-activations
 * and writes their gradients in one storage (its kernel and its bf16
 * twin). Given an op list whose first MLP backward writes d_pre_up into
 * d_norm (which no bf16 op writes), that layer's pre_gate, pre_up and
 * d_pre_gate must fall back to fp32 with it; the last layer's stay bf16. */
static void mlp_gradient_fp32(const tlm_so *so, const char *model) {
    tlm_so changed = *so;
    const uint32_t nb = so->header->nbuffers, nops = so->header->nops;
    tlm_abi_op *ops = xcalloc(nops, sizeof *ops);
    memcpy(ops, so->ops, nops * sizeof *ops);
    int32_t d_norm = -1;
    for (uint32_t i = 0; i < nb; i++)
        if (so->buffers[i].role == TLM_B_D_NORM) d_norm = (int32_t)i;
    tlm_operands_mlp_backward *first = NULL, *last = NULL;
    for (uint32_t k = 0; k < nops; k++)
        if (ops[k].kind == TLM_OP_MLP_BACKWARD) {
            if (!first) first = &ops[k].mlp_backward;
            last = &ops[k].mlp_backward;
        }
    CHECK(first && d_norm >= 0, "%s: no MLP backward or d_norm", model);
    if (!first || d_norm < 0) {
        free(ops);
        return;
    }
    const int32_t mine[3] = {first->in_pre_gate, first->in_pre_up, first->out_d_pre_gate};
    first->out_d_pre_up = d_norm;
    changed.ops = ops;
    bool *bf16 = xcalloc(nb + 1, sizeof *bf16);
    tlm_gpu_bf16_buffers(&changed, (int)nops, bf16);
    static const char *const names[] = {"pre_gate", "pre_up", "d_pre_gate"};
    for (int j = 0; j < 3; j++)
        CHECK(mine[j] < 0 || !bf16[mine[j]], "%s: with d_pre_up read in fp32, its MLP's %s is stored in bf16", model,
              names[j]);
    CHECK(last == first || (bf16[last->in_pre_up] && bf16[last->out_d_pre_up]),
          "%s: the last MLP's pre_up or d_pre_up is stored in fp32", model);
    free(bf16);
    free(ops);
}

/* Titans' chain of kernels that take their buffers in one storage (the
 * memory activation's qkv, act, mem_qkv; the memory's mem_qkv and y; the
 * per-head norm's y and the normalised y; the SiLU gate's x, gate_pre and
 * out): in an op list where the first layer's gate_pre has a reader with
 * no bf16 form (its memory gates' kernel, here), the whole chain of that
 * layer falls back to fp32, back to its qkv, and the other layers' stays
 * bf16. A rule applied once in op order would leave the read-out in bf16
 * with its normalised rows in fp32, a pair no kernel takes. */
static void titans_chain_fp32(const tlm_so *so, const char *model) {
    tlm_so changed = *so;
    const uint32_t nb = so->header->nbuffers, nops = so->header->nops;
    tlm_abi_op *ops = xcalloc(nops, sizeof *ops);
    memcpy(ops, so->ops, nops * sizeof *ops);
    int32_t chain[7] = {-1, -1, -1, -1, -1, -1, -1}, later_y = -1; /* qkv act mem_qkv y yn gate_pre out */
    tlm_abi_op *gates = NULL;
    for (uint32_t k = 0; k < nops; k++) {
        tlm_abi_op *op = &ops[k];
        if (op->layer != 0) {
            if (op->kind == TLM_OP_TITANS) later_y = op->titans.out_y;
            continue;
        }
        if (op->kind == TLM_OP_MEM_ACT)
            chain[0] = op->memory_act.in_qkv, chain[1] = op->memory_act.out_act, chain[2] = op->memory_act.out_mem_qkv;
        if (op->kind == TLM_OP_TITANS) chain[3] = op->titans.out_y;
        if (op->kind == TLM_OP_RMSNORM_HEADS) chain[4] = op->rmsnorm_heads.out_y;
        if (op->kind == TLM_OP_SILU_GATE) chain[5] = op->silu_gate.in_gate_pre, chain[6] = op->silu_gate.out_out;
        if (op->kind == TLM_OP_MEM_GATES && !gates) gates = op;
    }
    CHECK(gates && chain[5] >= 0, "%s: no memory gates or SiLU gate in layer 0", model);
    if (gates) gates->memory_gates.in_pre = chain[5];
    changed.ops = ops;
    bool *bf16 = xcalloc(nb + 1, sizeof *bf16);
    tlm_gpu_bf16_buffers(&changed, (int)nops, bf16);
    static const char *const names[] = {"qkv", "act", "mem_qkv", "mem_y", "mem_yn", "gate_pre", "attn_gated"};
    for (int j = 0; j < 7; j++)
        CHECK(chain[j] >= 0 && !bf16[chain[j]], "%s: with gate_pre read in fp32, layer 0's %s is stored in bf16", model,
              names[j]);
    CHECK(so->config->layers < 2 || (later_y >= 0 && bf16[later_y]), "%s: layer %d's mem_y is stored in fp32", model,
          (int)so->config->layers - 1);
    free(bf16);
    free(ops);
}

/* The bf16 GEMMs' scratch is sized from the fp32 buffers GEMMs read
 * (tlm_gpu_bf16_scratch_elems): widening a buffer no GEMM reads (Titans'
 * saved state; attention's lse elsewhere) leaves it as it is, widening one
 * that a GEMM reads in fp32 (dqkv, the qkv backward's) makes it hold two of
 * those. The model's runs show that it is enough. */
static void scratch_from_gemm_operands(const tlm_so *so, const char *model) {
    const uint32_t nb = so->header->nbuffers, nops = so->header->nops;
    const int64_t rows = B * 12, wide = 1 << 16; /* wider than any buffer of the test models */
    bool *bf16 = xcalloc(nb + 1, sizeof *bf16);
    tlm_gpu_bf16_buffers(so, (int)nops, bf16);
    const int64_t planned = tlm_gpu_bf16_scratch_elems(so, (int)nops, bf16, rows);
    tlm_abi_buffer *buffers = xcalloc(nb, sizeof *buffers);
    tlm_so widened = *so;
    widened.buffers = buffers;
    const uint32_t unread = so->config->mixer == TLM_MIXER_TITANS ? TLM_B_MEM_SAVED : TLM_B_LSE;
    for (int pass = 0; pass < 2; pass++) {
        const uint32_t role = pass == 0 ? unread : TLM_B_D_QKV;
        int hits = 0;
        memcpy(buffers, so->buffers, nb * sizeof *buffers);
        for (uint32_t i = 0; i < nb; i++)
            if (buffers[i].role == role && !bf16[i]) buffers[i].per_token = wide, hits++;
        const int64_t got = tlm_gpu_bf16_scratch_elems(&widened, (int)nops, bf16, rows);
        if (pass == 0)
            CHECK(hits > 0 && got == planned, "%s: the GEMM scratch, %lld elements, is %lld with a wider %s", model,
                  (long long)planned, (long long)got, role == TLM_B_MEM_SAVED ? "mem_saved" : "lse");
        else
            CHECK(hits > 0 && got >= tlm_bf16_gemm_scratch_elems(rows * wide, 2),
                  "%s: the GEMM scratch is %lld elements with a dqkv of %lld a token", model, (long long)got,
                  (long long)wide);
    }
    free(buffers);
    free(bf16);
}

static void bf16_model(const tlm_so *so, tlm_device *dev, const tlm_model *cpu, const int32_t *tokens,
                       const int32_t *targets, int64_t T, double cpu_loss, const float *cpu_logits) {
    const char *model = tlm_so_str(so, so->config->name);
    tlm_model g;
    tlm_err err = {""};
    if (!tlm_model_create_on(&g, so, dev, TLM_PRECISION_BF16, B, T, true, 0, &err)) {
        CHECK(false, "%s: cannot create the bf16 model: %s", model, err.msg);
        return;
    }
    int64_t halved = 0; /* bytes the bf16 norms save, at least */
    int titans_bf16 = 0;
    const bool titans = so->config->mixer == TLM_MIXER_TITANS; /* no softmax attention */
    for (uint32_t i = 0; i < so->header->nbuffers; i++) {
        const tlm_abi_buffer *b = &so->buffers[i];
        if (cpu->offsets[i] < 0) continue;
        bool norm = b->role == TLM_B_NORM1 || b->role == TLM_B_NORM2 || b->role == TLM_B_NORMF ||
                    b->role == TLM_B_PRE_GATE || b->role == TLM_B_PRE_UP || b->role == TLM_B_D_PRE_GATE ||
                    b->role == TLM_B_D_PRE_UP;
        bool read_by_role = b->role == TLM_B_RESID || b->role == TLM_B_MID;
        CHECK(!norm || g.gpu->bf16_buffers[i], "%s bf16: %s is stored in fp32", model, tlm_so_str(so, b->name));
        CHECK(b->role != TLM_B_LOGITS || g.gpu->bf16_buffers[i], "%s bf16: %s is stored in fp32", model,
              tlm_so_str(so, b->name));
        /* the mixers' activations: attention's y, every qkv, the gates'
         * tensors, Titans' activation, memory q, k, v, read-out and
         * normalised read-out in bf16; Titans' saved states, norms and
         * gates and every gradient (the D_ roles) but the MLP's
         * pre-activations' (above) in fp32 */
        bool mixer_bf16 = b->role == TLM_B_ATTN_Y || b->role == TLM_B_QKV || b->role == TLM_B_GATE_PRE ||
                          b->role == TLM_B_ATTN_GATED || b->role == TLM_B_MEM_ACT || b->role == TLM_B_MEM_QKV ||
                          b->role == TLM_B_MEM_Y || b->role == TLM_B_MEM_YN;
        bool mixer_fp32 = b->role == TLM_B_MEM_SAVED || b->role == TLM_B_MEM_RNORM || b->role == TLM_B_MEM_GATES_PRE ||
                          b->role == TLM_B_MEM_GATES || b->role == TLM_B_MEM_RSTD || b->role == TLM_B_D_RESID ||
                          b->role == TLM_B_D_NORM || b->role == TLM_B_D_ATTN_Y || b->role == TLM_B_D_QKV ||
                          b->role == TLM_B_D_GATE_PRE || b->role == TLM_B_D_ATTN_GATED ||
                          (b->role >= TLM_B_D_MEM_YN && b->role <= TLM_B_D_MEM_GATES_PRE);
        CHECK(!mixer_bf16 || g.gpu->bf16_buffers[i], "%s bf16: %s is stored in fp32", model, tlm_so_str(so, b->name));
        CHECK(!mixer_fp32 || !g.gpu->bf16_buffers[i], "%s bf16: %s is stored in bf16", model, tlm_so_str(so, b->name));
        titans_bf16 += titans && mixer_bf16;
        CHECK(!read_by_role || !g.gpu->bf16_buffers[i], "%s bf16: %s is stored in bf16", model,
              tlm_so_str(so, b->name));
        if (b->role == TLM_B_NORMF) halved = b->per_token / 2 * B * T * 2;
    }
    /* the head writes the logits in bf16, the loss's backward its gradient
     * over them, and the head's backward reads that bf16 gradient */
    for (uint32_t k = 0; k < so->header->nops; k++) {
        const tlm_abi_op *op = &so->ops[k];
        const int32_t z = op->kind == TLM_OP_HEAD            ? op->head.out_logits
                          : op->kind == TLM_OP_LOSS          ? op->loss.in_logits
                          : op->kind == TLM_OP_LOSS_BACKWARD ? op->loss_backward.out_dlogits
                          : op->kind == TLM_OP_HEAD_BACKWARD ? op->head_backward.in_dlogits
                                                             : -2;
        CHECK(z == -2 || (z >= 0 && g.gpu->bf16_buffers[z]), "%s bf16: op %u (%s) has its logits in fp32", model, k,
              tlm_op_name(op->kind));
    }
    /* per layer: qkv, act, mem_qkv, mem_y, mem_yn, gate_pre, attn_gated */
    CHECK(!titans || titans_bf16 == 7 * so->config->layers, "%s bf16: %d of Titans' activations in bf16", model,
          titans_bf16);
  /* Head size 64 or 128 with a bf16 y takes the tensor-core kernels (the
   * emulated device is an sm_90), anything else the scalar ones. */
    const int64_t hd = so->config->head_dim;
    const bool tc = !titans && (hd == 64 || hd == 128) && !getenv("TLM_GPU_ATTENTION");
    CHECK(g.gpu->attention_tc == tc, "%s bf16: attention %s the tensor cores", model,
          g.gpu->attention_tc ? "on" : "off");
    CHECK(g.arena_bytes <= cpu->arena_bytes - halved, "%s bf16: arena %lld bytes, fp32 %lld", model,
          (long long)g.arena_bytes, (long long)cpu->arena_bytes);
    act_twins(&g, model);
    dlogits_apart(so, model);
    mlp_gradient_fp32(so, model);
    scratch_from_gemm_operands(so, model);
    if (titans) titans_chain_fp32(so, model);
    memcpy(g.params, cpu->params, (size_t)cpu->param_floats * sizeof(float));
    CHECK(tlm_model_params_to_device(&g, &err), "%s", err.msg);
    tlm_model_zero_grads(&g);
    /* a shorter forward first: its logits are a prefix of the buffer */
    tlm_model_forward(&g, tokens, NULL, 1, T - 1);
    logits_widened(&g, model, NULL, (T - 1) * so->config->vocab);
    double loss = tlm_model_forward(&g, tokens, targets, B, T);
    const double dlogits = logits_widened(&g, model, cpu_logits, B * T * so->config->vocab);
    CHECK(dlogits <= LOGITS_BF16, "%s bf16 logits: %.3g relative in norm", model, dlogits);
    /* before the backward writes the logits' gradient over them */
    const int64_t V = so->config->vocab;
    const double own = cross_entropy(tlm_model_logits(&g), targets, B * T, V);
    tlm_model_backward(&g, 1.0f);
    CHECK(!tlm_model_device_error(&g), "%s bf16: %s", model, tlm_model_device_error(&g));
    CHECK(tlm_model_grads_to_host(&g, &err), "%s", err.msg);
    CHECK(fabs(loss - own) <= REL * fabs(own), "%s bf16 loss %.9g, the cross-entropy of its logits %.9g", model, loss,
          own);
    const double allowed = loss_bound(cpu_logits, targets, B * T, V, LOGITS_BF16) / fabs(cpu_loss);
    double dloss = fabs(loss - cpu_loss) / fabs(cpu_loss), worst = 0;
    CHECK(dloss <= allowed, "%s bf16 loss %.9g, fp32 CPU %.9g: %.3g relative, bound %.3g", model, loss, cpu_loss, dloss,
          allowed);
    CHECK(dloss <= BF16_LOSS_MEASURED, "%s bf16 loss %.9g, fp32 CPU %.9g: %.3g relative, past the measured %.3g", model,
          loss, cpu_loss, dloss, BF16_LOSS_MEASURED);
    CHECK(loss != cpu_loss, "%s bf16 loss equals fp32's: nothing was rounded", model);
    for (uint32_t i = 0; i < so->header->nparams; i++) {
        const float *a = tlm_model_grad(&g, (int)i), *b = tlm_model_grad(cpu, (int)i);
        double num = 0, den = 0;
        for (int64_t e = 0; e < so->params[i].count; e++)
            num += ((double)a[e] - b[e]) * ((double)a[e] - b[e]), den += (double)b[e] * b[e];
        double r = den > 0 ? sqrt(num / den) : sqrt(num);
        const char *name = tlm_so_str(so, so->params[i].name);
        const bool qk = strstr(name, ".q_proj.") || strstr(name, ".k_proj.");
        CHECK(r <= (titans ? BF16_GRAD_TITANS
                    : qk   ? BF16_GRAD_QK
                           : BF16_GRAD),
              "%s bf16 gradient %s: %.3g relative in norm", model, name, r);
        if (!(r <= worst)) worst = r;
    }
    printf(
        "%-20s bf16: loss %.2g relative (bound %.2g), logits %.2g and worst gradient %.2g relative in norm; arena %lld bytes "
        "(fp32 %lld)\n",
        model, dloss, allowed, dlogits, worst, (long long)g.arena_bytes, (long long)cpu->arena_bytes);
    tlm_model_destroy(&g);
    if (tc) attention_switch(so, dev, T);
}

static void run_model(const char *path, tlm_device *dev) {
    tlm_so so;
    open_so(path, &so);
    const int64_t T = so.config->context < 12 ? so.config->context : 12;
    const char *model = tlm_so_str(&so, so.config->name);
    tlm_model cpu, gpu;
    tlm_err err = {""};
    create_model(&cpu, &so, B, T, true);
    if (!tlm_model_create_on(&gpu, &so, dev, TLM_PRECISION_FP32, B, T, true, 0, &err)) {
        printf("FAIL %s: cannot create the model on the device: %s\n", model, err.msg);
        g_failures++;
        tlm_model_destroy(&cpu);
        tlm_so_close(&so);
        return;
    }
    init_test_params(&cpu, 7, 5.0, 0.2);
    memcpy(gpu.params, cpu.params, (size_t)cpu.param_floats * sizeof(float));
    CHECK(tlm_model_params_to_device(&gpu, &err), "%s", err.msg);

    int32_t *tokens = xcalloc((size_t)(B * T), sizeof *tokens), *targets = xcalloc((size_t)(B * T), sizeof *targets);
    tlm_rng rng;
    tlm_rng_seed(&rng, 11);
    draw_batch(&rng, so.config->vocab, B, T, 2, tokens, targets);

    /* one forward and backward */
    tlm_model_zero_grads(&cpu);
    tlm_model_zero_grads(&gpu);
    double lc = tlm_model_forward(&cpu, tokens, targets, B, T);
    double lg = tlm_model_forward(&gpu, tokens, targets, B, T);
    /* the logits before the backward writes their gradient over them; fp32
     * on the device in fp32 (no buffer is stored in bf16) */
    const size_t nlogits = (size_t)(B * T * so.config->vocab);
    float *cpu_logits = xcalloc(nlogits, sizeof(float));
    memcpy(cpu_logits, tlm_model_logits(&cpu), nlogits * sizeof(float));
    CHECK(!gpu.gpu->bf16_buffers, "%s fp32: some buffer is stored in bf16", model);
    tlm_model_backward(&cpu, 1.0f);
    tlm_model_backward(&gpu, 1.0f);
    CHECK(!tlm_model_device_error(&gpu), "%s: %s", model, tlm_model_device_error(&gpu));
    CHECK(fabs(lg - lc) <= REL * fabs(lc), "%s loss: gpu %.9g cpu %.9g", model, lg, lc);
    CHECK(tlm_model_grads_to_host(&gpu, &err), "%s", err.msg);
    double worst_grad = 0, worst_param = 0;
    for (uint32_t i = 0; i < so.header->nparams; i++)
        worst_grad =
            fmax(worst_grad, compare("gradient", tlm_so_str(&so, so.params[i].name), tlm_model_grad(&cpu, (int)i),
                                     tlm_model_grad(&gpu, (int)i), so.params[i].count));

    bf16_model(&so, dev, &cpu, tokens, targets, T, lc, cpu_logits);
    free(cpu_logits);

    /* a few optimizer steps from the same start */
    tlm_abi_train s = *so.train;
    tlm_train_resolve_defaults(&s);
    s.batch = B, s.accumulate = 1, s.context = T, s.steps = 10, s.warmup = 1, s.grad_clip = 1.0;
    s.eps = 1e-3;
    tlm_trainer tc, tg;
    /* model.so's -1 for a default min_lr, left unresolved, is refused */
    tlm_abi_train unresolved = s;
    unresolved.min_lr = -1;
    CHECK(!tlm_trainer_create(&tc, &cpu, &unresolved, false, &err) && strstr(err.msg, "min_lr -1"),
          "%s: the trainer took an unresolved min_lr", model);
    bool made = tlm_trainer_create(&tc, &cpu, &s, false, &err) && tlm_trainer_create(&tg, &gpu, &s, false, &err);
    CHECK(made, "%s: %s", model, err.msg);
    if (made) {
        CHECK(tlm_trainer_to_device(&tg, &err), "%s", err.msg);
        for (int k = 0; k < STEPS; k++) {
            draw_batch(&rng, so.config->vocab, B, T, 0, tokens, targets);
            tlm_step_result rc = tlm_trainer_step(&tc, tokens, targets, T);
            tlm_step_result rg = tlm_trainer_step(&tg, tokens, targets, T);
            CHECK(rg.finite && !tlm_model_device_error(&gpu), "%s step %d: %s", model, k + 1,
                  tlm_model_device_error(&gpu) ? tlm_model_device_error(&gpu) : "not finite");
            CHECK(fabs(rg.loss - rc.loss) <= REL * fabs(rc.loss), "%s step %d loss: gpu %.9g cpu %.9g", model, k + 1,
                  rg.loss, rc.loss);
            CHECK(fabs(rg.grad_norm - rc.grad_norm) <= REL * rc.grad_norm, "%s step %d norm: gpu %.9g cpu %.9g", model,
                  k + 1, rg.grad_norm, rc.grad_norm);
        }
        CHECK(tlm_trainer_to_host(&tg, &err), "%s", err.msg);
        for (uint32_t i = 0; i < so.header->nparams; i++)
            worst_param = fmax(worst_param,
                               compare("parameter", tlm_so_str(&so, so.params[i].name), tlm_model_param(&cpu, (int)i),
                                       tlm_model_param(&gpu, (int)i), so.params[i].count));
        tlm_trainer_destroy(&tc);
        tlm_trainer_destroy(&tg);
    }
    printf("%-20s loss %.7f (diff %.2g), worst gradient %.3f and parameter %.3f of the bound\n", model, lc,
           fabs(lg - lc), worst_grad, worst_param);
    free(tokens);
    free(targets);
    tlm_model_destroy(&gpu);
    tlm_model_destroy(&cpu);
    tlm_so_close(&so);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_gpu_model MODEL.so...\n");
        return 2;
    }
    tlm_set_num_threads(2);
    tlm_device *dev = open_test_device();
    for (int i = 1; i < argc; i++) run_model(argv[i], dev);
    tlm_device_close(dev);
    return test_finish("test_gpu_model");
}
