/* Every op's backward against central finite differences.
 *
 * For an op with output y, a fixed random R gives the scalar
 *   L = sum(y * R)   (summed in double),
 * whose gradient with respect to any input is what the backward computes
 * when handed dout = R. Each input entry (all of them for small tensors, 40
 * random ones otherwise) is nudged by +-h and
 *   fd = (L(x+h) - L(x-h)) / (2h)
 * compared with the analytic value; the error reported is
 *   max |analytic - fd| / max |fd|
 * over the checked entries. With float32 forwards, h = 1e-2 and inputs of
 * order one this sits near 1e-4; a wrong sign or a missing term gives
 * errors of order one, so the bound below (2e-3) separates them widely.
 *
 * The tests also pin the accumulate/write contract of ops.h: gradients that
 * must accumulate are pre-filled with 0.25 (and 0.25 is subtracted before
 * the comparison), gradients that must be written are pre-filled with 1000
 * (left over, they would show as a huge error). */
#include "test_util.h"

#include "attention_reference.h"

#define TOL 2e-3
#define PRE_ACC 0.25f
#define PRE_WRITE 1000.0f

typedef double (*loss_fn)(void *ctx);

static tlm_rng g_rng;

static double fd_check(const char *op, const char *wrt, loss_fn f, void *ctx, float *x, size_t n, const float *an) {
    size_t m = n <= 40 ? n : 40;
    double maxdiff = 0.0, maxfd = 0.0;
    for (size_t k = 0; k < m; k++) {
        size_t i = n <= 40 ? k : (size_t)tlm_rng_below(&g_rng, n);
        float old = x[i];
        float h = 1e-2f * (fabsf(old) > 1.0f ? fabsf(old) : 1.0f);
        float xp = old + h, xm = old - h;
        x[i] = xp;
        double lp = f(ctx);
        x[i] = xm;
        double lm = f(ctx);
        x[i] = old;
        double fd = (lp - lm) / ((double)xp - (double)xm);
        maxdiff = fmax(maxdiff, fabs(fd - an[i]));
        maxfd = fmax(maxfd, fabs(fd));
    }
    double rel = maxdiff / (maxfd > 1e-6 ? maxfd : 1e-6);
    printf("  %-16s d/d%-10s max rel err %.2e  (%zu entries)\n", op, wrt, rel, m);
    CHECK(rel < TOL, "%s: gradient wrt %s off by %.3g", op, wrt, rel);
    CHECK(maxfd > 1e-4, "%s: gradient wrt %s is ~0, test is vacuous", op, wrt);
    return rel;
}

/* turns an accumulated gradient back into the plain gradient */
static void unaccumulate(float *g, size_t n) {
    for (size_t i = 0; i < n; i++) g[i] -= PRE_ACC;
}

static float *rnd(size_t n, float lo, float hi) {
    float *p = falloc(n);
    fill_uniform(&g_rng, p, n, lo, hi);
    return p;
}

static float *filled(size_t n, float v) {
    float *p = falloc(n);
    fill_const(p, n, v);
    return p;
}

/* ---- embedding -------------------------------------------------------- */

typedef struct {
    int N, C;
    const int32_t *ids;
    float *table, *out, *R;
} emb_ctx;

static double emb_loss(void *p) {
    emb_ctx *c = p;
    tlm_embedding_forward(c->out, c->ids, c->table, c->N, c->C);
    return dot_d(c->out, c->R, (size_t)c->N * c->C);
}

static void test_embedding(void) {
    static const int32_t ids[6] = {1, 3, 1, 0, 3, 3}; /* repeats: scatter-add */
    emb_ctx c = {6, 5, ids, rnd(4 * 5, -1, 1), falloc(30), rnd(30, -1, 1)};
    float *dt = filled(20, PRE_ACC);
    tlm_embedding_backward(dt, c.R, ids, c.N, c.C);
    unaccumulate(dt, 20);
    fd_check("embedding", "table", emb_loss, &c, c.table, 20, dt);
    free(c.table), free(c.out), free(c.R), free(dt);
}

/* ---- rmsnorm (model and per-head) --------------------------------------- */

typedef struct {
    int N, H, D; /* heads: H > 0; plain: H == 0 */
    float *x, *w, *out, *rstd, *R;
} rms_ctx;

static double rms_loss(void *p) {
    rms_ctx *c = p;
    if (c->H) tlm_rmsnorm_heads_forward(c->out, c->rstd, c->x, c->w, c->N, c->H, c->D, 1e-5f);
    else tlm_rmsnorm_forward(c->out, c->rstd, c->x, c->w, c->N, c->D, 1e-5f);
    size_t n = (size_t)c->N * (c->H ? c->H : 1) * c->D;
    return dot_d(c->out, c->R, n);
}

/* C: under one vector (7), whole vectors and a tail (21: the weight's
 * blocks of 16 and 5), a block of 8 and 5 (13) */
static void test_rmsnorm(int N, int C) {
    int n = N * C;
    rms_ctx c = {N, 0, C, rnd(n, -1, 1), rnd(C, 0.5f, 1.5f), falloc(n), falloc(N), rnd(n, -1, 1)};
    rms_loss(&c);
    float *dx = filled(n, PRE_ACC), *dw = filled(C, PRE_ACC);
    tlm_rmsnorm_backward(dx, dw, c.R, c.x, c.w, c.rstd, N, C);
    unaccumulate(dx, n), unaccumulate(dw, C);
    fd_check("rmsnorm", "x", rms_loss, &c, c.x, n, dx);
    fd_check("rmsnorm", "w", rms_loss, &c, c.w, C, dw);
    free(c.x), free(c.w), free(c.out), free(c.rstd), free(c.R), free(dx), free(dw);
}

/* D: under one vector (4), a vector and a tail (13), whole vectors (64,
 * a model's head) */
static void test_rmsnorm_heads(int N, int H, int D) {
    int n = N * H * D;
    rms_ctx c = {N, H, D, rnd(n, -1, 1), rnd(H * D, 0.5f, 1.5f), falloc(n), falloc(N * H), rnd(n, -1, 1)};
    rms_loss(&c);
    float *dx = filled(n, PRE_WRITE), *dw = filled(H * D, PRE_ACC);
    tlm_rmsnorm_heads_backward(dx, dw, c.R, c.x, c.w, c.rstd, N, H, D);
    unaccumulate(dw, H * D);
    fd_check("rmsnorm_heads", "x", rms_loss, &c, c.x, n, dx);
    fd_check("rmsnorm_heads", "w", rms_loss, &c, c.w, H * D, dw);
    /* without a weight */
    float *w = c.w;
    c.w = NULL;
    rms_loss(&c);
    fill_const(dx, n, PRE_WRITE);
    tlm_rmsnorm_heads_backward(dx, NULL, c.R, c.x, NULL, c.rstd, N, H, D);
    fd_check("rmsnorm_heads/1", "x", rms_loss, &c, c.x, n, dx);
    free(w), free(c.x), free(c.out), free(c.rstd), free(c.R), free(dx), free(dw);
}

/* ---- l2norm ------------------------------------------------------------ */

typedef struct {
    int R, D;
    float *x, *out, *rn, *Rw;
} l2_ctx;

static double l2_loss(void *p) {
    l2_ctx *c = p;
    tlm_l2norm_forward(c->out, c->rn, c->x, c->R, c->D, 1e-6f);
    return dot_d(c->out, c->Rw, (size_t)c->R * c->D);
}

static void test_l2norm(void) {
    int R = 4, D = 5, n = R * D;
    l2_ctx c = {R, D, rnd(n, -1, 1), falloc(n), falloc(R), rnd(n, -1, 1)};
    l2_loss(&c);
    float *dx = filled(n, PRE_WRITE);
    tlm_l2norm_backward(dx, c.Rw, c.x, c.rn, R, D);
    fd_check("l2norm", "x", l2_loss, &c, c.x, n, dx);
    /* rows have unit norm */
    for (int r = 0; r < R; r++) {
        double s = dot_d(c.out + r * D, c.out + r * D, D);
        CHECK(fabs(s - 1.0) < 1e-5, "row %d norm^2 %.8f", r, s);
    }
    free(c.x), free(c.out), free(c.rn), free(c.Rw), free(dx);
}

/* ---- linear ------------------------------------------------------------ */

typedef struct {
    int N, in, out;
    float *x, *w, *y, *R;
} lin_ctx;

static double lin_loss(void *p) {
    lin_ctx *c = p;
    tlm_linear_forward(c->y, c->x, c->w, c->N, c->in, c->out, false);
    return dot_d(c->y, c->R, (size_t)c->N * c->out);
}

static void test_linear(void) {
    int N = 3, in = 5, out = 4;
    lin_ctx c = {N, in, out, rnd(N * in, -1, 1), rnd(out * in, -1, 1), falloc(N * out), rnd(N * out, -1, 1)};
    float *dx = filled(N * in, PRE_WRITE), *dw = filled(out * in, PRE_ACC);
    tlm_linear_backward(dx, dw, c.R, c.x, c.w, N, in, out, false);
    unaccumulate(dw, out * in);
    fd_check("linear", "x", lin_loss, &c, c.x, N * in, dx);
    fd_check("linear", "w", lin_loss, &c, c.w, out * in, dw);
    /* accumulate_dx adds; forward accumulate adds */
    float *dx2 = filled(N * in, PRE_ACC);
    tlm_linear_backward(dx2, NULL, c.R, NULL, c.w, N, in, out, true);
    unaccumulate(dx2, N * in);
    CHECK(rel_err(dx2, dx, N * in) < 1e-6, "accumulate_dx");
    lin_loss(&c);
    float *y2 = filled(N * out, 0.5f);
    tlm_linear_forward(y2, c.x, c.w, N, in, out, true);
    for (int i = 0; i < N * out; i++) y2[i] -= 0.5f;
    CHECK(rel_err(y2, c.y, N * out) < 1e-6, "forward accumulate");
    free(c.x), free(c.w), free(c.y), free(c.R), free(dx), free(dw), free(dx2), free(y2);
}

/* ---- rope -------------------------------------------------------------- */

typedef struct {
    int B, T, H, D, stride;
    float *x, *out, *cs, *sn, *R;
} rope_ctx;

static double rope_loss(void *p) {
    rope_ctx *c = p;
    tlm_rope_forward(c->out, c->x, c->cs, c->sn, c->B, c->T, c->H, c->D, c->stride);
    return dot_d(c->out, c->R, (size_t)c->B * c->T * c->stride);
}

/* D: pairs under one vector (6), a vector of pairs and a tail (22) */
static void test_rope(int stride_mult, int D) {
    int B = 2, T = 5, H = 2, stride = stride_mult * H * D;
    size_t n = (size_t)B * T * stride;
    rope_ctx c = {B, T, H, D, stride, rnd(n, -1, 1), falloc(n), falloc(T * D / 2), falloc(T * D / 2), rnd(n, -1, 1)};
    tlm_rope_init(c.cs, c.sn, T, D, 10000.0);
    /* with a stride, only the head slices belong to the op: zero R
     * elsewhere so the loss ignores untouched entries of out */
    for (size_t bt = 0; bt < (size_t)B * T; bt++)
        for (int j = H * D; j < stride; j++) c.R[bt * stride + j] = 0.0f;
    rope_loss(&c);
    float *dx = filled(n, PRE_WRITE);
    tlm_rope_backward(dx, c.R, c.cs, c.sn, B, T, H, D, stride);
    for (size_t bt = 0; bt < (size_t)B * T; bt++)
        for (int j = H * D; j < stride; j++) dx[bt * stride + j] = 0.0f;
    fd_check(stride_mult == 1 ? "rope" : "rope/strided", "x", rope_loss, &c, c.x, n, dx);
    /* in place gives the same (rope_loss: out from the unperturbed x) */
    rope_loss(&c);
    float *y = falloc(n);
    memcpy(y, c.x, n * sizeof(float));
    tlm_rope_forward(y, y, c.cs, c.sn, B, T, H, D, stride);
    bool same = true;
    for (size_t bt = 0; bt < (size_t)B * T; bt++)
        for (int j = 0; j < H * D; j++) same &= y[bt * stride + j] == c.out[bt * stride + j];
    CHECK(same, "rope in place differs");
    free(c.x), free(c.out), free(c.cs), free(c.sn), free(c.R), free(dx), free(y);
}

/* ---- attention (separate q, k, v and packed qkv) ------------------------ */

static double att_loss(void *p) {
    att_ctx *c = p;
    tlm_attention_forward(c->y, c->lse, c->q, c->k, c->v, c->B, c->T, c->H, c->D, c->stride);
    return dot_d(c->y, c->R, (size_t)c->B * c->T * c->H * c->D);
}

static void test_attention(bool packed, int B, int T, int H, int D) {
    int C = H * D;
    int stride = packed ? 3 * C : C;
    size_t nqkv = (size_t)B * T * stride, ny = (size_t)B * T * C;
    float *buf = rnd(packed ? nqkv : 3 * nqkv, -1, 1);
    float *dbuf = filled(packed ? nqkv : 3 * nqkv, PRE_WRITE);
    float *q = buf, *k = packed ? buf + C : buf + nqkv;
    float *v = packed ? buf + 2 * C : buf + 2 * nqkv;
    float *dq = dbuf, *dk = packed ? dbuf + C : dbuf + nqkv;
    float *dv = packed ? dbuf + 2 * C : dbuf + 2 * nqkv;
    att_ctx c = {B, T, H, D, stride, q, k, v, falloc(ny), falloc((size_t)B * T * H), rnd(ny, -1, 1)};
    att_loss(&c);
    tlm_attention_backward(dq, dk, dv, c.R, c.y, c.lse, q, k, v, B, T, H, D, stride);
    char name[64];
    snprintf(name, sizeof name, "%s%s", packed ? "attention/qkv" : "attention", T == 5 && D == 4 ? "" : "/odd");
    check_attention_reference(&c, dq, dk, dv, name);
    if (T > 1) { /* T = 1: y = v, nothing to differentiate but v */
        if (packed) {
            fd_check(name, "qkv", att_loss, &c, buf, nqkv, dbuf);
        } else {
            fd_check(name, "q", att_loss, &c, q, nqkv, dq);
            fd_check(name, "k", att_loss, &c, k, nqkv, dk);
            fd_check(name, "v", att_loss, &c, v, nqkv, dv);
        }
    }
    att_loss(&c);
    /* causality: changing the last token's k and v leaves earlier y alone */
    float *y0 = falloc(ny);
    memcpy(y0, c.y, ny * sizeof(float));
    for (int b = 0; b < B; b++)
        for (int j = 0; j < C; j++) {
            k[((size_t)b * T + T - 1) * stride + j] += 1.0f;
            v[((size_t)b * T + T - 1) * stride + j] -= 1.0f;
        }
    att_loss(&c);
    bool same = true, last_changed = false;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int j = 0; j < C; j++) {
                size_t i = ((size_t)b * T + t) * C + j;
                if (t < T - 1) same &= c.y[i] == y0[i];
                else last_changed |= c.y[i] != y0[i];
            }
    CHECK(same && last_changed, "attention is not causal");
    free(buf), free(dbuf), free(c.y), free(c.lse), free(c.R), free(y0);
}

/* ---- elementwise activations -------------------------------------------- */

typedef enum { ACT_SILU, ACT_SIGMOID, ACT_GELU } act_kind;

typedef struct {
    act_kind kind;
    size_t n;
    float *x, *out, *R;
} act_ctx;

static double act_loss(void *p) {
    act_ctx *c = p;
    if (c->kind == ACT_SILU) tlm_silu_forward(c->out, c->x, c->n);
    if (c->kind == ACT_SIGMOID) tlm_sigmoid_forward(c->out, c->x, c->n);
    if (c->kind == ACT_GELU) tlm_gelu_forward(c->out, c->x, c->n);
    return dot_d(c->out, c->R, c->n);
}

static void test_activation(act_kind kind, const char *name) {
    size_t n = 24;
    act_ctx c = {kind, n, rnd(n, -3, 3), falloc(n), rnd(n, -1, 1)};
    act_loss(&c);
    float *dx = filled(n, PRE_WRITE);
    if (kind == ACT_SILU) tlm_silu_backward(dx, c.R, c.x, n);
    if (kind == ACT_SIGMOID) tlm_sigmoid_backward(dx, c.R, c.out, n);
    if (kind == ACT_GELU) tlm_gelu_backward(dx, c.R, c.x, n);
    fd_check(name, "x", act_loss, &c, c.x, n, dx);
    free(c.x), free(c.out), free(c.R), free(dx);
}

typedef struct {
    int R, D;
    float *y, *g, *out, *Rw;
} gate_ctx;

static double gate_loss(void *p) {
    gate_ctx *c = p;
    tlm_sigmoid_gate_forward(c->out, c->y, c->g, c->R, c->D);
    return dot_d(c->out, c->Rw, (size_t)c->R * c->D);
}

static void test_sigmoid_gate(int R, int D, const char *name) {
    size_t n = (size_t)R * D;
    gate_ctx c = {R, D, rnd(n, -1, 1), rnd(R, -2, 2), falloc(n), rnd(n, -1, 1)};
    gate_loss(&c);
    float *dy = filled(n, PRE_WRITE), *dg = filled(R, PRE_WRITE);
    tlm_sigmoid_gate_backward(dy, dg, c.Rw, c.y, c.g, R, D);
    fd_check(name, "y", gate_loss, &c, c.y, n, dy);
    fd_check(name, "g", gate_loss, &c, c.g, R, dg);
    free(c.y), free(c.g), free(c.out), free(c.Rw), free(dy), free(dg);
}

typedef struct {
    size_t n;
    float *g, *u, *h, *R;
} swiglu_ctx;

static double swiglu_loss(void *p) {
    swiglu_ctx *c = p;
    tlm_swiglu_forward(c->h, c->g, c->u, c->n);
    return dot_d(c->h, c->R, c->n);
}

static void test_swiglu(void) {
    size_t n = 20;
    swiglu_ctx c = {n, rnd(n, -3, 3), rnd(n, -1, 1), falloc(n), rnd(n, -1, 1)};
    float *dg = filled(n, PRE_WRITE), *du = filled(n, PRE_WRITE);
    tlm_swiglu_backward(dg, du, c.R, c.g, c.u, n);
    fd_check("swiglu", "g", swiglu_loss, &c, c.g, n, dg);
    fd_check("swiglu", "u", swiglu_loss, &c, c.u, n, du);
    /* dh may alias dg */
    float *a = falloc(n);
    memcpy(a, c.R, n * sizeof(float));
    float *du2 = falloc(n);
    tlm_swiglu_backward(a, du2, a, c.g, c.u, n);
    CHECK(memcmp(a, dg, n * sizeof(float)) == 0 && memcmp(du2, du, n * sizeof(float)) == 0, "aliased dh differs");
    free(c.g), free(c.u), free(c.h), free(c.R), free(dg), free(du), free(a), free(du2);
}

/* ---- reference MLPs ------------------------------------------------------
 * Called as a driver splitting work between threads would: forward and
 * backward_data on two row ranges, backward_weight on two width ranges. */

typedef struct {
    bool gelu;
    int N, C, F, rsplit, jsplit;
    float *x, *wg, *wu, *wd, *out0, *pg, *pu, *out, *R;
} mlp_ctx;

static double mlp_loss(void *p) {
    mlp_ctx *c = p;
    memcpy(c->out, c->out0, (size_t)c->N * c->C * sizeof(float));
    int cut[3] = {0, c->rsplit, c->N};
    for (int s = 0; s < 2; s++) {
        if (c->gelu) tlm_mlp_gelu_forward(c->C, c->F, cut[s], cut[s + 1], c->x, c->wu, c->wd, c->pu, c->out);
        else tlm_mlp_swiglu_forward(c->C, c->F, cut[s], cut[s + 1], c->x, c->wg, c->wu, c->wd, c->pg, c->pu, c->out);
    }
    return dot_d(c->out, c->R, (size_t)c->N * c->C);
}

static void test_mlp(bool gelu) {
    int N = 5, C = 6, F = 8;
    size_t nx = (size_t)N * C, nw = (size_t)F * C, nh = (size_t)N * F;
    mlp_ctx c = {gelu,
                 N,
                 C,
                 F,
                 2,
                 3,
                 rnd(nx, -1, 1),
                 rnd(nw, -0.5f, 0.5f),
                 rnd(nw, -0.5f, 0.5f),
                 rnd(nw, -0.5f, 0.5f),
                 rnd(nx, -1, 1),
                 falloc(nh),
                 falloc(nh),
                 falloc(nx),
                 rnd(nx, -1, 1)};
    mlp_loss(&c);
    float *dx = filled(nx, PRE_WRITE), *dwg = filled(nw, PRE_ACC);
    float *dwu = filled(nw, PRE_ACC), *dwd = filled(nw, PRE_ACC);
    float *dpg = filled(nh, PRE_WRITE), *dpu = filled(nh, PRE_WRITE);
    int rc[3] = {0, c.rsplit, N}, jc[3] = {0, c.jsplit, F};
    for (int s = 0; s < 2; s++) {
        if (gelu) tlm_mlp_gelu_backward_data(C, F, rc[s], rc[s + 1], c.x, c.wu, c.wd, c.pu, c.R, dpu, dx);
        else tlm_mlp_swiglu_backward_data(C, F, rc[s], rc[s + 1], c.x, c.wg, c.wu, c.wd, c.pg, c.pu, c.R, dpg, dpu, dx);
    }
    for (int s = 0; s < 2; s++) {
        if (gelu) tlm_mlp_gelu_backward_weight(C, F, N, jc[s], jc[s + 1], c.x, c.pu, c.R, dpu, dwu, dwd);
        else tlm_mlp_swiglu_backward_weight(C, F, N, jc[s], jc[s + 1], c.x, c.pg, c.pu, c.R, dpg, dpu, dwg, dwu, dwd);
    }
    unaccumulate(dwg, nw), unaccumulate(dwu, nw), unaccumulate(dwd, nw);
    const char *name = gelu ? "mlp_gelu" : "mlp_swiglu";
    fd_check(name, "x", mlp_loss, &c, c.x, nx, dx);
    if (!gelu) fd_check(name, "w_gate", mlp_loss, &c, c.wg, nw, dwg);
    fd_check(name, "w_up", mlp_loss, &c, c.wu, nw, dwu);
    fd_check(name, "w_down", mlp_loss, &c, c.wd, nw, dwd);
    /* the residual is added, not overwritten: d out / d out0 = identity */
    fd_check(name, "out(resid)", mlp_loss, &c, c.out0, nx, c.R);
    /* pre-activations are the plain projections */
    float *ref = falloc(nh);
    mlp_loss(&c);
    tlm_linear_forward(ref, c.x, c.wu, N, C, F, false);
    CHECK(rel_err(c.pu, ref, nh) < 1e-6, "%s pre_up", name);
    free(ref);
    free(c.x), free(c.wg), free(c.wu), free(c.wd), free(c.out0), free(c.pg);
    free(c.pu), free(c.out), free(c.R), free(dx), free(dwg);
    free(dwu), free(dwd), free(dpg), free(dpu);
}

/* ---- cross-entropy ------------------------------------------------------- */

typedef struct {
    int N, V;
    const int32_t *tgt;
    float *logits, *lse, *losses;
    float dloss;
} ce_ctx;

static double ce_loss(void *p) {
    ce_ctx *c = p;
    return c->dloss * tlm_crossentropy_forward(c->losses, c->lse, c->logits, c->tgt, c->N, c->V);
}

static void test_crossentropy(void) {
    static const int32_t tgt[5] = {2, 0, -1, 6, 3}; /* row 2 ignored */
    int N = 5, V = 7;
    size_t n = (size_t)N * V;
    ce_ctx c = {N, V, tgt, rnd(n, -2, 2), falloc(N), falloc(N), 1.7f};
    double L = ce_loss(&c);
    float *dz = filled(n, PRE_WRITE);
    tlm_crossentropy_backward(dz, c.logits, c.lse, tgt, N, V, c.dloss);
    fd_check("crossentropy", "logits", ce_loss, &c, c.logits, n, dz);
    ce_loss(&c); /* lse and losses of the unperturbed logits again */
    /* mean over the 4 valid rows of the per-row losses */
    double s = 0;
    for (int i = 0; i < N; i++) s += c.losses[i];
    CHECK(fabs(L / c.dloss - s / 4) < 1e-6, "mean %.8f vs %.8f", L / c.dloss, s / 4);
    CHECK(c.losses[2] == 0.0f, "ignored row has loss %g", c.losses[2]);
    /* in place */
    float *z = falloc(n);
    memcpy(z, c.logits, n * sizeof(float));
    tlm_crossentropy_backward(z, z, c.lse, tgt, N, V, c.dloss);
    CHECK(memcmp(z, dz, n * sizeof(float)) == 0, "in-place backward differs");
    /* stability: shifting a row by 1e4 changes nothing (softmax invariance) */
    for (size_t i = 0; i < n; i++) z[i] = c.logits[i] + 1e4f * (float)(i / V % 2);
    ce_ctx c2 = c;
    c2.logits = z;
    double L2 = ce_loss(&c2);
    CHECK(isfinite(L2) && fabs(L2 - L) < 1e-2 * fabs(L), "shifted loss %.6f vs %.6f", L2, L);
    free(c.logits), free(c.lse), free(c.losses), free(dz), free(z);
}

int main(void) {
    tlm_rng_seed(&g_rng, 1234);
    printf("finite-difference checks (bound %.0e):\n", TOL);
    test_embedding();
    test_rmsnorm(3, 7);
    test_rmsnorm(3, 21);
    test_rmsnorm(2, 13);
    test_rmsnorm_heads(2, 3, 4);
    test_rmsnorm_heads(2, 3, 13);
    test_rmsnorm_heads(2, 2, 64);
    test_l2norm();
    test_linear();
    test_rope(1, 6);
    test_rope(1, 22);
    test_rope(3, 6);
    test_rope(3, 22);
    test_attention(false, 2, 5, 2, 4);
    test_attention(true, 2, 5, 2, 4);
    /* odd sizes across the blocks (64 query and key rows; channels in
     * chunks of 64, then 8, then one): one token, a part block, two and
     * three blocks with a part, a head size that takes every chunk */
    test_attention(true, 1, 1, 2, 4);
    test_attention(false, 2, 37, 3, 6);
    test_attention(true, 1, 70, 2, 75);
    test_attention(true, 2, 97, 1, 3);
    test_attention(false, 1, 150, 1, 8);
    test_activation(ACT_SILU, "silu");
    test_activation(ACT_SIGMOID, "sigmoid");
    test_activation(ACT_GELU, "gelu");
    test_sigmoid_gate(12, 1, "sigmoid_gate");
    test_sigmoid_gate(4, 3, "sigmoid_gate/h");
    test_swiglu();
    test_mlp(false);
    test_mlp(true);
    test_crossentropy();
    return test_finish("test_ops_grad");
}
