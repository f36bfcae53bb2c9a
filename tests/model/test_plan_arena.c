/* The memory plans of compiled models, and the interpreter running on them.
 *
 * Static, for the two stored plans (train, infer) and for plans made now
 * for other sizes:
 *  - a stored plan equals what tlm_plan_arena recomputes (every offset, the
 *    arena size);
 *  - the planner's lifetimes equal the first and last op that names each
 *    buffer (recomputed here), and a buffer no op of the plan names has no
 *    offset;
 *  - every buffer is 64-byte aligned, inside the arena and big enough for
 *    what the interpreter reads or writes through it (per op kind, below);
 *  - no two buffers whose lifetimes overlap share a byte (every pair);
 *  - every buffer is written by the first op that names it, not read (a read
 *    there would see another buffer's leftovers);
 *  - q, k and v are contiguous (one [3A, D] GEMM), and each layer's MLP
 *    kernel has the layer's width.
 * At run time (arenas filled with NaN first, so a read of memory nobody
 * wrote shows):
 *  - forward and backward in the planned arena give bit for bit the logits,
 *    loss and gradients of a layout where no buffers share memory;
 *  - a forward with a smaller batch or sequence, in the same arena or in a
 *    model planned for those sizes, gives the full forward's logits for
 *    the rows it has (causality, independent sequences), and the two give
 *    the same loss and gradients;
 *  - changing the tokens from position t0 on leaves logits before t0 and
 *    other sequences bit for bit as they were;
 *  - an inference model (the stored infer plan) gives the training model's
 *    logits.
 *
 * usage: test_plan_arena MODEL.so... */
#include <stdint.h>

#include "arena_plan.h"
#include "model_util.h"
#include "tlm_rt/ops.h"

/* Logits of the same rows from GEMMs of other sizes (blocked differently):
 * each is within ~3e-6 of float64 for these models (check_model.py), so
 * the two may differ by about twice that. */
static const double ROW_TOL = 2e-5;

/* ---- what the interpreter (runtime/model/model.c) touches per operand ---- */

typedef struct need {
    int64_t per_token, per_token_t;
} need;
typedef struct op_needs {
    need in[4], out[4];
    bool known;
} op_needs;

/* Floats per token (and per token x T) each operand of op must hold, as
 * run_op uses them; W: the op's kernel width. */
static op_needs needs_of(const tlm_so *so, const tlm_abi_op *op) {
    const tlm_abi_config *am = so->config;
    int64_t D = am->d_model, A = am->heads * am->head_dim, V = am->vocab, H = am->heads;
    int64_t W = op->kernel >= 0 ? so->kernels[op->kernel].width : 0;
    need d = {D, 0}, a = {A, 0}, qkv = {3 * A, 0}, one = {1, 0}, v = {V, 0}, w = {W, 0}, heads = {H, 0};
    op_needs n = {.known = true};
    switch (op->kind) {
    case TLM_OP_EMBED: n.out[0] = d; break;
    case TLM_OP_EMBED_BACKWARD: n.in[0] = d; break;
    case TLM_OP_RMSNORM: n.in[0] = d, n.out[0] = d, n.out[1] = one; break;
    case TLM_OP_RMSNORM_BACKWARD: n.in[0] = d, n.in[1] = d, n.in[2] = one, n.out[0] = d; break;
    case TLM_OP_QKV: n.in[0] = d, n.out[0] = qkv; break;
    case TLM_OP_QKV_BACKWARD: n.in[0] = qkv, n.in[1] = d, n.out[0] = d; break;
    case TLM_OP_ROPE:
    case TLM_OP_ROPE_BACKWARD: n.out[0] = qkv; break;
    case TLM_OP_ATTENTION: n.in[0] = qkv, n.out[0] = heads, n.out[1] = a; break;
    case TLM_OP_ATTENTION_BACKWARD: n.in[0] = a, n.in[1] = qkv, n.in[2] = heads, n.in[3] = a, n.out[0] = qkv; break;
    case TLM_OP_OUT_PROJ: n.in[0] = a, n.in[1] = d, n.out[0] = d; break;
    case TLM_OP_OUT_PROJ_BACKWARD: n.in[0] = d, n.in[1] = a, n.out[0] = a; break;
    case TLM_OP_MLP: n.in[0] = d, n.in[1] = d, n.out[0] = w, n.out[1] = w, n.out[2] = d; break;
    case TLM_OP_MLP_BACKWARD:
        n.in[0] = d, n.in[1] = d, n.in[2] = w, n.in[3] = w, n.out[0] = w, n.out[1] = w, n.out[2] = d;
        break;
    case TLM_OP_HEAD: n.in[0] = d, n.out[0] = v; break;
    case TLM_OP_HEAD_BACKWARD: n.in[0] = v, n.in[1] = d, n.out[0] = d; break;
    case TLM_OP_LOSS: n.in[0] = v, n.out[0] = one; break;
    case TLM_OP_LOSS_BACKWARD: n.in[0] = v, n.in[1] = one, n.out[0] = v; break;
    default: n.known = false; break;   /* the other mixers' ops: not checked here */
    }
    return n;
}

/* Does op read buffer b (an input, or an output it updates in place)? */
static bool reads(const tlm_abi_op *op, int b) {
    for (int j = 0; j < 4; j++)
        if (op->in[j] == b) return true;
    bool in_place = op->kind == TLM_OP_ROPE || op->kind == TLM_OP_ROPE_BACKWARD || (op->flags & TLM_OP_FLAG_ACCUMULATE);
    return in_place && op->out[0] == b;
}

/* ---- static checks of one plan ---------------------------------------- */

static void check_plan(const tlm_so *so, const char *what, int nops, int64_t B, int64_t T, const int64_t *offsets,
                       int64_t arena) {
    const int nb = (int)so->header->nbuffers;
    const tlm_abi_buffer *bufs = so->buffers;
    const tlm_abi_op *ops = so->ops;
    int *first = xcalloc((size_t)nb, sizeof *first), *last = xcalloc((size_t)nb, sizeof *last);
    int *pfirst = xcalloc((size_t)nb, sizeof *pfirst), *plast = xcalloc((size_t)nb, sizeof *plast);
    int64_t *re = xcalloc((size_t)nb, sizeof *re), *bytes = xcalloc((size_t)nb, sizeof *bytes);
    int failures = g_failures;

    int64_t rearena = tlm_plan_arena(bufs, nb, ops, nops, B, T, re, pfirst, plast);
    CHECK(rearena == arena, "%s: arena %lld bytes, recomputed %lld", what, (long long)arena, (long long)rearena);
    for (int i = 0; i < nb; i++)
        CHECK(re[i] == offsets[i], "%s: buffer %s at %lld, recomputed %lld", what, tlm_so_str(so, bufs[i].name),
              (long long)offsets[i], (long long)re[i]);

    for (int i = 0; i < nb; i++) first[i] = last[i] = -1;
    for (int k = 0; k < nops; k++)
        for (int j = 0; j < 4; j++) {
            int ids[2] = {ops[k].in[j], ops[k].out[j]};
            for (int x = 0; x < 2; x++) {
                if (ids[x] < 0) continue;
                if (first[ids[x]] < 0) first[ids[x]] = k;
                last[ids[x]] = k;
            }
        }
    int used = 0;
    for (int i = 0; i < nb; i++) {
        const char *name = tlm_so_str(so, bufs[i].name);
        CHECK(first[i] == pfirst[i] && last[i] == plast[i], "%s: %s lives [%d, %d], the planner says [%d, %d]", what,
              name, first[i], last[i], pfirst[i], plast[i]);
        if (first[i] < 0) {
            CHECK(offsets[i] == -1, "%s: %s is not used but has offset %lld", what, name, (long long)offsets[i]);
            continue;
        }
        used++;
        bytes[i] = tlm_buffer_bytes(&bufs[i], B, T);
        int64_t floats = bufs[i].per_token * B * T + bufs[i].per_token_t * B * T * T;
        CHECK(bytes[i] >= 4 * floats, "%s: %s has %lld bytes for %lld floats", what, name, (long long)bytes[i],
              (long long)floats);
        CHECK(offsets[i] >= 0 && offsets[i] % TLM_ARENA_ALIGN == 0 && offsets[i] + bytes[i] <= arena,
              "%s: %s at [%lld, %lld) in an arena of %lld", what, name, (long long)offsets[i],
              (long long)(offsets[i] + bytes[i]), (long long)arena);
        CHECK(!reads(&ops[first[i]], i), "%s: %s is read by op %d before anything wrote it", what, name, first[i]);
    }
    /* every pair alive at a common op: disjoint bytes */
    long pairs = 0;
    for (int i = 0; i < nb; i++)
        for (int j = i + 1; j < nb; j++) {
            if (first[i] < 0 || first[j] < 0 || first[i] > last[j] || first[j] > last[i]) continue;
            pairs++;
            bool apart = offsets[i] + bytes[i] <= offsets[j] || offsets[j] + bytes[j] <= offsets[i];
            CHECK(apart, "%s: %s [%lld, %lld) and %s [%lld, %lld) overlap while both are alive (ops %d..%d, %d..%d)",
                  what, tlm_so_str(so, bufs[i].name), (long long)offsets[i], (long long)(offsets[i] + bytes[i]),
                  tlm_so_str(so, bufs[j].name), (long long)offsets[j], (long long)(offsets[j] + bytes[j]), first[i],
                  last[i], first[j], last[j]);
        }
    /* operand sizes against what the interpreter touches */
    int unknown = 0;
    for (int k = 0; k < nops; k++) {
        op_needs n = needs_of(so, &ops[k]);
        if (!n.known) {
            unknown++;
            continue;
        }
        for (int j = 0; j < 4; j++) {
            int ids[2] = {ops[k].in[j], ops[k].out[j]};
            need nd[2] = {n.in[j], n.out[j]};
            for (int x = 0; x < 2; x++) {
                bool wanted = nd[x].per_token || nd[x].per_token_t;
                if (ids[x] < 0) {
                    /* a SwiGLU-only operand may be absent for GELU */
                    bool optional = (ops[k].kind == TLM_OP_MLP && x == 1 && j == 0) ||
                                    (ops[k].kind == TLM_OP_MLP_BACKWARD && ((x == 0 && j == 2) || (x == 1 && j == 0)));
                    CHECK(!wanted || optional, "%s: op %d (kind %u) lacks its %s%d", what, k, ops[k].kind,
                          x ? "out" : "in", j);
                    continue;
                }
                const tlm_abi_buffer *b = &bufs[ids[x]];
                CHECK(b->per_token >= nd[x].per_token && b->per_token_t >= nd[x].per_token_t,
                      "%s: op %d (kind %u) uses %s as %s%d: %lld + %lld T floats per token, needs %lld + %lld T", what,
                      k, ops[k].kind, tlm_so_str(so, b->name), x ? "out" : "in", j, (long long)b->per_token,
                      (long long)b->per_token_t, (long long)nd[x].per_token, (long long)nd[x].per_token_t);
            }
        }
    }
    printf("  %-28s B %lld, T %lld: %d buffers in %.2f MiB, %ld live pairs disjoint%s%s\n", what, (long long)B,
           (long long)T, used, (double)arena / 1048576.0, pairs, unknown ? ", ops of other mixers unchecked" : "",
           g_failures == failures ? "" : "  FAILED");
    free(first), free(last), free(pfirst), free(plast), free(re), free(bytes);
}

static void check_tables(const tlm_so *so) {
    const tlm_abi_config *am = so->config;
    for (uint32_t i = 0; i < so->header->nparams; i++) {
        const tlm_abi_param *p = &so->params[i];
        if (p->role == TLM_P_K || p->role == TLM_P_V) {
            const tlm_abi_param *prev = &so->params[i - 1];
            CHECK(i > 0 && prev->role == p->role - 1 && prev->layer == p->layer &&
                      prev->offset + prev->count == p->offset,
                  "%s does not directly follow %s in the parameter block", tlm_so_str(so, p->name),
                  tlm_so_str(so, prev->name));
        }
        if ((p->role == TLM_P_GATE || p->role == TLM_P_UP || p->role == TLM_P_DOWN) && p->layer >= 0) {
            const tlm_abi_layer *l = &so->layers[p->layer];
            int64_t W = p->role == TLM_P_DOWN ? p->shape[1] : p->shape[0];
            CHECK(W == l->width && so->kernels[l->kernel].width == l->width &&
                      so->kernels[l->kernel].d_model == am->d_model,
                  "%s: width %lld, layer %d width %lld, kernel width %lld", tlm_so_str(so, p->name), (long long)W,
                  p->layer, (long long)l->width, (long long)so->kernels[l->kernel].width);
        }
    }
    /* the inference plan runs exactly the forward ops */
    const tlm_abi_plan *inf = &so->plans[TLM_PLAN_INFER], *tr = &so->plans[TLM_PLAN_TRAIN];
    CHECK(tr->nops == so->header->nops, "the train plan runs %u of %u ops", tr->nops, so->header->nops);
    uint32_t first_backward = 0;
    while (first_backward < so->header->nops && so->ops[first_backward].kind != TLM_OP_LOSS_BACKWARD) first_backward++;
    CHECK(inf->nops == first_backward, "the infer plan runs %u ops, the forward pass has %u", inf->nops,
          first_backward);
}

/* ---- run-time checks ---------------------------------------------------- */

static void poison(tlm_model *m) { memset(m->arena, 0xff, (size_t)m->arena_bytes); }

/* Gives m a layout where no two buffers share memory (NaN-filled). */
static void unshare(tlm_model *m) {
    const tlm_so *so = m->so;
    int64_t at = 0;
    for (uint32_t i = 0; i < so->header->nbuffers; i++) {
        if (m->offsets[i] < 0) continue;
        m->offsets[i] = at;
        at += tlm_buffer_bytes(&so->buffers[i], m->B, m->T);
    }
    free(m->arena);
    m->arena = NULL;
    if (posix_memalign((void **)&m->arena, 64, (size_t)at + 64) != 0) exit(2);
    m->arena_bytes = at;
    poison(m);
}

static bool same_bits(const void *a, const void *b, size_t n) { return memcmp(a, b, n) == 0; }

/* max |a - b| / max |b| over rows [0, T') of sequences [0, B') of a
 * [B, T, V] block a against a [B', T', V] block b */
static double rows_err(const float *full, int64_t T, const float *part, int64_t Bp, int64_t Tp, int64_t V,
                       bool *bitwise) {
    double d = 0, s = 0;
    *bitwise = true;
    for (int64_t b = 0; b < Bp; b++)
        for (int64_t t = 0; t < Tp; t++) {
            const float *x = full + (b * T + t) * V, *y = part + (b * Tp + t) * V;
            *bitwise &= same_bits(x, y, (size_t)V * sizeof *x);
            for (int64_t v = 0; v < V; v++) {
                d = fmax(d, fabs((double)x[v] - y[v]));
                s = fmax(s, fabs((double)x[v]));
            }
        }
    return d / (s > 0 ? s : 1);
}

static bool all_finite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return false;
    return true;
}

static void copy_sub(int32_t *dst, const int32_t *src, int64_t T, int64_t Bp, int64_t Tp) {
    for (int64_t b = 0; b < Bp; b++) memcpy(dst + b * Tp, src + b * T, (size_t)Tp * sizeof *dst);
}

static void run_checks(const tlm_so *so) {
    const int64_t V = so->config->vocab;
    const tlm_abi_plan *sp = &so->plans[TLM_PLAN_TRAIN];
    /* the stored training plan when it is small, else smaller sizes */
    int64_t B = sp->batch, T = sp->seq;
    if (sp->arena_bytes > (64 << 20)) B = 2, T = T < 32 ? T : 32;
    const size_t nlog = (size_t)(B * T * V), npar = (size_t)so->config->param_floats;
    int32_t *x = xcalloc((size_t)(B * T), sizeof *x), *y = xcalloc((size_t)(B * T), sizeof *y);
    tlm_rng rng;
    tlm_rng_seed(&rng, 99);
    draw_batch(&rng, V, B, T, 0, x, y);

    /* planned arena against no sharing at all, both NaN-filled */
    tlm_model m, u;
    create_model(&m, so, B, T, true);
    create_model(&u, so, B, T, true);
    init_test_params(&m, 3, 5.0, 0.2);
    init_test_params(&u, 3, 5.0, 0.2);
    unshare(&u);
    poison(&m);
    tlm_model_zero_grads(&m);
    tlm_model_zero_grads(&u);
    double lm = tlm_model_forward(&m, x, y, B, T), lu = tlm_model_forward(&u, x, y, B, T);
    float *logits = xcalloc(nlog, sizeof *logits);
    memcpy(logits, tlm_model_logits(&m), nlog * sizeof *logits);
    CHECK(all_finite(logits, nlog), "NaN or Inf in the logits: something read memory nobody wrote");
    CHECK(lm == lu && same_bits(logits, tlm_model_logits(&u), nlog * sizeof *logits),
          "the planned arena changes the forward pass (loss %.9g vs %.9g)", lm, lu);
    tlm_model_backward(&m, 1.0f);
    tlm_model_backward(&u, 1.0f);
    CHECK(all_finite(m.grads, npar), "NaN or Inf in the gradients: something read memory nobody wrote");
    CHECK(same_bits(m.grads, u.grads, npar * sizeof *m.grads), "the planned arena changes the gradients");
    printf("  B %lld, T %lld (%s plan): logits, loss and gradients bit-identical to an unshared layout\n", (long long)B,
           (long long)T, B == sp->batch && T == sp->seq ? "stored" : "recomputed");
    tlm_model_destroy(&u);

    /* smaller sizes: in the same arena and in a model planned for them */
    int64_t Bp = B > 1 ? B - 1 : 1, Tp = T > 3 ? T - 3 : 1;
    int32_t *xs = xcalloc((size_t)(Bp * Tp), sizeof *xs), *ys = xcalloc((size_t)(Bp * Tp), sizeof *ys);
    copy_sub(xs, x, T, Bp, Tp);
    copy_sub(ys, y, T, Bp, Tp);
    tlm_model s;
    create_model(&s, so, Bp, Tp, true);
    memcpy(s.params, m.params, npar * sizeof *s.params);
    poison(&s);
    poison(&m);
    tlm_model_zero_grads(&m);
    tlm_model_zero_grads(&s);
    double l1 = tlm_model_forward(&m, xs, ys, Bp, Tp), l2 = tlm_model_forward(&s, xs, ys, Bp, Tp);
    bool bits1, bits2;
    double e1 = rows_err(logits, T, tlm_model_logits(&m), Bp, Tp, V, &bits1);
    double e2 = rows_err(logits, T, tlm_model_logits(&s), Bp, Tp, V, &bits2);
    CHECK(e1 <= ROW_TOL && e2 <= ROW_TOL, "logits of %lld x %lld tokens differ from the full forward's: %.2e, %.2e",
          (long long)Bp, (long long)Tp, e1, e2);
    CHECK(l1 == l2 && same_bits(tlm_model_logits(&m), tlm_model_logits(&s), (size_t)(Bp * Tp * V) * sizeof(float)),
          "B %lld, T %lld: the planned and the recomputed arena give different logits", (long long)Bp, (long long)Tp);
    tlm_model_backward(&m, 1.0f);
    tlm_model_backward(&s, 1.0f);
    CHECK(all_finite(m.grads, npar) && same_bits(m.grads, s.grads, npar * sizeof *m.grads),
          "B %lld, T %lld: the planned and the recomputed arena give different gradients", (long long)Bp,
          (long long)Tp);
    printf("  B %lld, T %lld in the B %lld x T %lld arena and in its own: rows of the full logits (%s, %.1e), "
           "same loss and gradients\n",
           (long long)Bp, (long long)Tp, (long long)B, (long long)T, bits1 && bits2 ? "bit-identical" : "max rel",
           fmax(e1, e2));
    tlm_model_destroy(&s);

    /* causality and independent sequences: new tokens from t0 on in
     * sequence 0 */
    int64_t t0 = T / 2;
    for (int64_t t = t0; t < T; t++) x[t] = (x[t] + 1 + (int32_t)t) % (int32_t)V;
    poison(&m);
    tlm_model_forward(&m, x, y, B, T);
    const float *z = tlm_model_logits(&m);
    bool before = same_bits(z, logits, (size_t)(t0 * V) * sizeof *z);
    bool others = same_bits(z + T * V, logits + T * V, (size_t)((B - 1) * T * V) * sizeof *z);
    bool after = !same_bits(z + t0 * V, logits + t0 * V, (size_t)((T - t0) * V) * sizeof *z);
    CHECK(before && others && after,
          "tokens from position %lld of sequence 0 changed: logits before it %s, "
          "other sequences %s, logits from it on %s",
          (long long)t0, before ? "kept" : "CHANGED", others ? "kept" : "CHANGED", after ? "changed" : "UNCHANGED");
    printf("  causality: new tokens from position %lld of sequence 0 leave earlier logits and %lld other "
           "sequences bit-identical\n",
           (long long)t0, (long long)(B - 1));

    /* inference with the stored infer plan: the training model's logits */
    tlm_model inf;
    create_model(&inf, so, 1, so->config->context, false);
    memcpy(inf.params, m.params, npar * sizeof *inf.params);
    poison(&inf);
    poison(&m);
    tlm_model_forward(&m, x, y, B, T);
    memcpy(logits, tlm_model_logits(&m), nlog * sizeof *logits);
    tlm_model_forward(&inf, x, NULL, 1, T);
    bool bits;
    double e = rows_err(logits, T, tlm_model_logits(&inf), 1, T, V, &bits);
    CHECK(e <= ROW_TOL, "the inference model's logits differ by %.2e", e);
    printf("  inference model (stored plan B 1, T %lld) on %lld tokens: the training model's logits (%s, %.1e)\n",
           (long long)so->config->context, (long long)T, bits ? "bit-identical" : "max rel", e);
    tlm_model_destroy(&inf);

    tlm_model_destroy(&m);
    free(x), free(y), free(xs), free(ys), free(logits);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fputs("usage: test_plan_arena MODEL.so...\n", stderr);
        return 2;
    }
    tlm_set_num_threads(1);   /* small models; OpenMP's waiting threads are slow on a loaded machine */
    for (int i = 1; i < argc; i++) {
        tlm_so so;
        open_so(argv[i], &so);
        const tlm_abi_config *am = so.config;
        printf("%s (%s)\n", tlm_so_str(&so, am->name), argv[i]);
        check_tables(&so);
        for (int k = 0; k < 2; k++) {
            const tlm_abi_plan *p = &so.plans[k];
            char what[64];
            snprintf(what, sizeof what, "stored %s plan", k == TLM_PLAN_TRAIN ? "train" : "infer");
            check_plan(&so, what, (int)p->nops, p->batch, p->seq, tlm_so_plan_offsets(&so, k), p->arena_bytes);
        }
        /* plans made now for other sizes, as tlm_model_create makes them */
        int64_t sizes[][2] = {{1, 1}, {1, am->context}, {3, 5}, {2, am->context > 7 ? 7 : am->context}};
        for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
            for (int kind = 0; kind < 2; kind++) {
                int nops = (int)so.plans[kind].nops, nb = (int)so.header->nbuffers;
                int64_t *off = xcalloc((size_t)nb, sizeof *off);
                int64_t arena = tlm_plan_arena(so.buffers, nb, so.ops, nops, sizes[k][0], sizes[k][1], off, NULL, NULL);
                char what[64];
                snprintf(what, sizeof what, "recomputed %s plan", kind == TLM_PLAN_TRAIN ? "train" : "infer");
                check_plan(&so, what, nops, sizes[k][0], sizes[k][1], off, arena);
                free(off);
            }
        run_checks(&so);
        tlm_so_close(&so);
    }
    return test_finish("test_plan_arena");
}
