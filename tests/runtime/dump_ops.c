/* Runs every op (and the tiny model) on random inputs and writes inputs,
 * outputs and gradients to a safetensors file, for
 * tests/reference/check_ops.py to recompute with PyTorch.
 *
 * Gradients are those of L = sum(out * R) for a dumped random R (the
 * backward run with dout = R); for cross-entropy and the model, of the mean
 * loss. Names are "<op>.<tensor>".
 *
 * usage: dump_ops OUT.safetensors
 *        dump_ops --read IN.safetensors   (prints each tensor's name, dtype,
 *        shape and element sum: check_ops.py uses it to test that the C
 *        reader accepts files written by another implementation) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"
#include "tiny_model.h"

/* ---- a list of tensors to write; owns copies of the data ---------------- */

enum { MAX_T = 256 };
static tlm_st_tensor g_t[MAX_T];
static int g_n;
static tlm_rng g_rng;

static void put(const char *op, const char *name, tlm_dtype dt, const void *data, int ndim, const int64_t *shape) {
    if (g_n == MAX_T) {
        fprintf(stderr, "dump_ops: too many tensors\n");
        exit(2);
    }
    tlm_st_tensor *t = &g_t[g_n++];
    char *nm = malloc(strlen(op) + strlen(name) + 2);
    sprintf(nm, "%s.%s", op, name);
    t->name = nm;
    t->dtype = dt;
    t->ndim = ndim;
    size_t n = tlm_dtype_size(dt);
    for (int i = 0; i < ndim; i++) {
        t->shape[i] = shape[i];
        n *= (size_t)shape[i];
    }
    void *copy = malloc(n ? n : 1);
    memcpy(copy, data, n);
    t->data = copy;
}

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})
#define NDIM(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
/* F32 tensor with the given dims */
#define PUTF(op, name, data, ...) put(op, name, TLM_F32, data, NDIM(__VA_ARGS__), SHAPE(__VA_ARGS__))
#define PUTI(op, name, data, ...) put(op, name, TLM_I32, data, NDIM(__VA_ARGS__), SHAPE(__VA_ARGS__))

static float *rnd(size_t n, float lo, float hi) {
    float *p = falloc(n);
    tlm_rng_fill_uniform(&g_rng, p, n, lo, hi);
    return p;
}

/* ---- the ops ------------------------------------------------------------- */

static void dump_embedding(void) {
    int N = 10, C = 6, V = 5;
    int32_t ids[10];
    for (int i = 0; i < N; i++) ids[i] = (int32_t)tlm_rng_below(&g_rng, V);
    float *table = rnd(V * C, -1, 1), *R = rnd(N * C, -1, 1);
    float *out = falloc(N * C), *dt = falloc(V * C);
    tlm_embedding_forward(out, ids, table, N, C);
    tlm_embedding_backward(dt, R, ids, N, C);
    PUTI("embedding", "ids", ids, N);
    PUTF("embedding", "table", table, V, C);
    PUTF("embedding", "R", R, N, C);
    PUTF("embedding", "out", out, N, C);
    PUTF("embedding", "dtable", dt, V, C);
    free(table), free(R), free(out), free(dt);
}

static void dump_rmsnorm(bool heads) {
    int N = 6, H = heads ? 3 : 1, D = heads ? 8 : 24, W = H * D;
    const char *op = heads ? "rmsnorm_heads" : "rmsnorm";
    float *x = rnd(N * W, -2, 2), *w = rnd(W, 0.5f, 1.5f), *R = rnd(N * W, -1, 1);
    float *out = falloc(N * W), *rstd = falloc(N * H), *dx = falloc(N * W), *dw = falloc(W);
    if (heads) {
        tlm_rmsnorm_heads_forward(out, rstd, x, w, N, H, D, 1e-5f);
        tlm_rmsnorm_heads_backward(dx, dw, R, x, w, rstd, N, H, D);
    } else {
        tlm_rmsnorm_forward(out, rstd, x, w, N, D, 1e-5f);
        tlm_rmsnorm_backward(dx, dw, R, x, w, rstd, N, D);
    }
    PUTF(op, "x", x, N, W);
    PUTF(op, "w", w, W);
    PUTF(op, "R", R, N, W);
    PUTF(op, "out", out, N, W);
    PUTF(op, "rstd", rstd, N * H);
    PUTF(op, "dx", dx, N, W);
    PUTF(op, "dw", dw, W);
    free(x), free(w), free(R), free(out), free(rstd), free(dx), free(dw);
}

static void dump_l2norm(void) {
    int R = 9, D = 8;
    float *x = rnd(R * D, -1, 1), *Rw = rnd(R * D, -1, 1);
    float *out = falloc(R * D), *rn = falloc(R), *dx = falloc(R * D);
    tlm_l2norm_forward(out, rn, x, R, D, 1e-6f);
    tlm_l2norm_backward(dx, Rw, x, rn, R, D);
    PUTF("l2norm", "x", x, R, D);
    PUTF("l2norm", "R", Rw, R, D);
    PUTF("l2norm", "out", out, R, D);
    PUTF("l2norm", "dx", dx, R, D);
    free(x), free(Rw), free(out), free(rn), free(dx);
}

static void dump_linear(void) {
    int N = 7, in = 24, out = 20;
    float *x = rnd(N * in, -1, 1), *w = rnd(out * in, -0.3f, 0.3f), *R = rnd(N * out, -1, 1);
    float *y = falloc(N * out), *dx = falloc(N * in), *dw = falloc(out * in);
    tlm_linear_forward(y, x, w, N, in, out, false);
    tlm_linear_backward(dx, dw, R, x, w, N, in, out, false);
    PUTF("linear", "x", x, N, in);
    PUTF("linear", "w", w, out, in);
    PUTF("linear", "R", R, N, out);
    PUTF("linear", "y", y, N, out);
    PUTF("linear", "dx", dx, N, in);
    PUTF("linear", "dw", dw, out, in);
    free(x), free(w), free(R), free(y), free(dx), free(dw);
}

static void dump_rope(void) {
    int B = 2, T = 64, H = 2, D = 16;
    size_t n = (size_t)B * T * H * D;
    float *x = rnd(n, -1, 1), *R = rnd(n, -1, 1), *out = falloc(n), *dx = falloc(n);
    float *cs = falloc(T * D / 2), *sn = falloc(T * D / 2);
    tlm_rope_init(cs, sn, T, D, 10000.0);
    tlm_rope_forward(out, x, cs, sn, B, T, H, D, H * D);
    tlm_rope_backward(dx, R, cs, sn, B, T, H, D, H * D);
    PUTF("rope", "x", x, B, T, H, D);
    PUTF("rope", "R", R, B, T, H, D);
    PUTF("rope", "out", out, B, T, H, D);
    PUTF("rope", "dx", dx, B, T, H, D);
    free(x), free(R), free(out), free(dx), free(cs), free(sn);
}

static void dump_attention(void) {
    int B = 2, T = 37, H = 3, D = 6, C = H * D; /* T: two query blocks and a part */
    size_t n = (size_t)B * T * C;
    float *q = rnd(n, -1, 1), *k = rnd(n, -1, 1), *v = rnd(n, -1, 1), *R = rnd(n, -1, 1);
    float *y = falloc(n), *lse = falloc((size_t)B * T * H);
    float *dq = falloc(n), *dk = falloc(n), *dv = falloc(n);
    tlm_attention_forward(y, lse, q, k, v, B, T, H, D, C);
    tlm_attention_backward(dq, dk, dv, R, y, lse, q, k, v, B, T, H, D, C);
    PUTF("attention", "q", q, B, T, H, D);
    PUTF("attention", "k", k, B, T, H, D);
    PUTF("attention", "v", v, B, T, H, D);
    PUTF("attention", "R", R, B, T, C);
    PUTF("attention", "y", y, B, T, C);
    PUTF("attention", "lse", lse, B, T, H);
    PUTF("attention", "dq", dq, B, T, H, D);
    PUTF("attention", "dk", dk, B, T, H, D);
    PUTF("attention", "dv", dv, B, T, H, D);
    free(q), free(k), free(v), free(R), free(y), free(lse), free(dq), free(dk), free(dv);
}

static void dump_elementwise(void) {
    int n = 64;
    float *x = rnd(n, -4, 4), *R = rnd(n, -1, 1), *out = falloc(n), *dx = falloc(n);
    tlm_silu_forward(out, x, n);
    tlm_silu_backward(dx, R, x, n);
    PUTF("silu", "x", x, n), PUTF("silu", "R", R, n);
    PUTF("silu", "out", out, n), PUTF("silu", "dx", dx, n);
    tlm_sigmoid_forward(out, x, n);
    tlm_sigmoid_backward(dx, R, out, n);
    PUTF("sigmoid", "x", x, n), PUTF("sigmoid", "R", R, n);
    PUTF("sigmoid", "out", out, n), PUTF("sigmoid", "dx", dx, n);
    tlm_gelu_forward(out, x, n);
    tlm_gelu_backward(dx, R, x, n);
    PUTF("gelu", "x", x, n), PUTF("gelu", "R", R, n);
    PUTF("gelu", "out", out, n), PUTF("gelu", "dx", dx, n);
    /* swiglu: g = x, u random */
    float *u = rnd(n, -1, 1), *du = falloc(n);
    tlm_swiglu_forward(out, x, u, n);
    tlm_swiglu_backward(dx, du, R, x, u, n);
    PUTF("swiglu", "g", x, n), PUTF("swiglu", "u", u, n), PUTF("swiglu", "R", R, n);
    PUTF("swiglu", "h", out, n), PUTF("swiglu", "dg", dx, n), PUTF("swiglu", "du", du, n);
    /* head-wise sigmoid gate: y [8, 8], g [8] */
    int Rr = 8, D = 8;
    float *y = rnd(Rr * D, -1, 1), *g = rnd(Rr, -3, 3), *Rw = rnd(Rr * D, -1, 1);
    float *o = falloc(Rr * D), *dy = falloc(Rr * D), *dg = falloc(Rr);
    tlm_sigmoid_gate_forward(o, y, g, Rr, D);
    tlm_sigmoid_gate_backward(dy, dg, Rw, y, g, Rr, D);
    PUTF("sigmoid_gate", "y", y, Rr, D), PUTF("sigmoid_gate", "g", g, Rr);
    PUTF("sigmoid_gate", "R", Rw, Rr, D), PUTF("sigmoid_gate", "out", o, Rr, D);
    PUTF("sigmoid_gate", "dy", dy, Rr, D), PUTF("sigmoid_gate", "dg", dg, Rr);
    free(x), free(R), free(out), free(dx), free(u), free(du);
    free(y), free(g), free(Rw), free(o), free(dy), free(dg);
}

/* Sizes past the reference's h tiles (64 rows x 128 columns, not
 * multiples), work split over rows (forward, backward_data) and over the
 * width (backward_weight) as a driver would. */
static void dump_mlp(bool gelu) {
    const char *op = gelu ? "mlp_gelu" : "mlp_swiglu";
    int N = 150, C = 24, F = 300;
    float *x = rnd(N * C, -1, 1), *out0 = rnd(N * C, -1, 1), *R = rnd(N * C, -1, 1);
    float *wg = rnd(F * C, -0.2f, 0.2f), *wu = rnd(F * C, -0.2f, 0.2f);
    float *wd = rnd(C * F, -0.2f, 0.2f);
    float *pg = falloc(N * F), *pu = falloc(N * F);
    float *out = falloc(N * C), *dx = falloc(N * C), *dpg = falloc(N * F), *dpu = falloc(N * F);
    float *dwg = falloc(F * C), *dwu = falloc(F * C), *dwd = falloc(C * F);
    memcpy(out, out0, sizeof(float) * N * C);
    int rc[3] = {0, 70, N}, jc[3] = {0, 130, F};
    for (int s = 0; s < 2; s++) {
        if (gelu) tlm_mlp_gelu_forward(C, F, rc[s], rc[s + 1], x, wu, wd, pu, out);
        else tlm_mlp_swiglu_forward(C, F, rc[s], rc[s + 1], x, wg, wu, wd, pg, pu, out);
    }
    for (int s = 0; s < 2; s++) {
        if (gelu) tlm_mlp_gelu_backward_data(C, F, rc[s], rc[s + 1], x, wu, wd, pu, R, dpu, dx);
        else tlm_mlp_swiglu_backward_data(C, F, rc[s], rc[s + 1], x, wg, wu, wd, pg, pu, R, dpg, dpu, dx);
    }
    for (int s = 0; s < 2; s++) {
        if (gelu) tlm_mlp_gelu_backward_weight(C, F, N, jc[s], jc[s + 1], x, pu, R, dpu, dwu, dwd);
        else tlm_mlp_swiglu_backward_weight(C, F, N, jc[s], jc[s + 1], x, pg, pu, R, dpg, dpu, dwg, dwu, dwd);
    }
    PUTF(op, "x", x, N, C), PUTF(op, "out0", out0, N, C), PUTF(op, "R", R, N, C);
    if (!gelu) PUTF(op, "w_gate", wg, F, C);
    PUTF(op, "w_up", wu, F, C), PUTF(op, "w_down", wd, C, F);
    PUTF(op, "out", out, N, C);
    if (!gelu) PUTF(op, "pre_gate", pg, N, F);
    PUTF(op, "pre_up", pu, N, F);
    PUTF(op, "dx", dx, N, C);
    if (!gelu) PUTF(op, "dw_gate", dwg, F, C);
    PUTF(op, "dw_up", dwu, F, C), PUTF(op, "dw_down", dwd, C, F);
    free(x), free(out0), free(R), free(wg), free(wu), free(wd), free(pg), free(pu);
    free(out), free(dx), free(dpg), free(dpu), free(dwg), free(dwu), free(dwd);
}

static void dump_crossentropy(void) {
    int N = 12, V = 50;
    float *z = rnd(N * V, -4, 4), *lse = falloc(N), *losses = falloc(N), *dz = falloc(N * V);
    int32_t tgt[12];
    for (int i = 0; i < N; i++) tgt[i] = (int32_t)tlm_rng_below(&g_rng, V);
    tgt[5] = -1; /* ignored */
    for (int v = 0; v < V; v++) z[7 * V + v] += 80.0f; /* a row with a large offset */
    float loss = (float)tlm_crossentropy_forward(losses, lse, z, tgt, N, V);
    tlm_crossentropy_backward(dz, z, lse, tgt, N, V, 1.0f);
    PUTF("crossentropy", "logits", z, N, V);
    PUTI("crossentropy", "targets", tgt, N);
    PUTF("crossentropy", "losses", losses, N);
    PUTF("crossentropy", "lse", lse, N);
    put("crossentropy", "loss", TLM_F32, &loss, 0, NULL);
    PUTF("crossentropy", "dlogits", dz, N, V);
    free(z), free(lse), free(losses), free(dz);
}

static void dump_tiny(void) {
    tiny_model m;
    tiny_init(&m, 7, 0.3f);
    int N = m.B * m.T;
    int32_t *ids = malloc(sizeof(int32_t) * N), *tgt = malloc(sizeof(int32_t) * N);
    for (int i = 0; i < N; i++) {
        ids[i] = (int32_t)tlm_rng_below(&g_rng, m.V);
        tgt[i] = (int32_t)tlm_rng_below(&g_rng, m.V);
    }
    float loss = (float)tiny_forward(&m, ids, tgt);
    tiny_backward(&m, ids, tgt);
    for (int i = 0; i < m.nparams; i++) {
        const tiny_param *p = &m.params[i];
        char gname[128];
        snprintf(gname, sizeof gname, "grad.%s", p->name);
        put("tiny", p->name, TLM_F32, m.p + p->offset, p->ndim, p->shape);
        put("tiny", gname, TLM_F32, m.g + p->offset, p->ndim, p->shape);
    }
    PUTI("tiny", "ids", ids, m.B, m.T);
    PUTI("tiny", "targets", tgt, m.B, m.T);
    PUTF("tiny", "logits", m.logits, m.B, m.T, m.V);
    put("tiny", "loss", TLM_F32, &loss, 0, NULL);
    free(ids), free(tgt);
    tiny_free(&m);
}

static int read_and_print(const char *path) {
    tlm_err err;
    tlm_st_file *f = tlm_st_open(path, &err);
    if (!f) {
        printf("error: %s\n", err.msg);
        return 1;
    }
    for (int i = 0; i < tlm_st_meta_count(f); i++) {
        const tlm_st_meta *m = tlm_st_meta_at(f, i);
        printf("meta %s=%s\n", m->key, m->value);
    }
    for (int i = 0; i < tlm_st_count(f); i++) {
        const tlm_st_tensor *t = tlm_st_at(f, i);
        size_t n = t->nbytes / tlm_dtype_size(t->dtype);
        double sum = 0;
        for (size_t k = 0; k < n; k++) {
            /* memcpy: the data need not be aligned for its type */
            const unsigned char *at = (const unsigned char *)t->data + k * tlm_dtype_size(t->dtype);
            float f32;
            double f64;
            int64_t i64;
            int32_t i32;
            switch (t->dtype) {
            case TLM_F32:
                memcpy(&f32, at, 4);
                sum += f32;
                break;
            case TLM_F64:
                memcpy(&f64, at, 8);
                sum += f64;
                break;
            case TLM_I64:
                memcpy(&i64, at, 8);
                sum += (double)i64;
                break;
            case TLM_I32:
                memcpy(&i32, at, 4);
                sum += i32;
                break;
            case TLM_U8: sum += *at; break;
            default: break;
            }
        }
        printf("tensor %s %s [", t->name, tlm_dtype_name(t->dtype));
        for (int d = 0; d < t->ndim; d++) printf("%s%lld", d ? "," : "", (long long)t->shape[d]);
        printf("] %.17g\n", sum);
    }
    tlm_st_close(f);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--read") == 0) return read_and_print(argv[2]);
    if (argc != 2) {
        fprintf(stderr, "usage: dump_ops OUT.safetensors | --read IN.safetensors\n");
        return 2;
    }
    tlm_rng_seed(&g_rng, 42);
    dump_embedding();
    dump_rmsnorm(false);
    dump_rmsnorm(true);
    dump_l2norm();
    dump_linear();
    dump_rope();
    dump_attention();
    dump_elementwise();
    dump_mlp(false);
    dump_mlp(true);
    dump_crossentropy();
    dump_tiny();
    static const tlm_st_meta meta[] = {
        {"rmsnorm_eps", "1e-5"},
        {"l2norm_eps", "1e-6"},
        {"rope_base", "10000"},
        {"tiny_layers", "layer 0: packed qkv, swiglu; layer 1: gated attention, gelu"},
    };
    tlm_err err;
    if (tlm_st_write(argv[1], g_t, g_n, meta, 4, &err) != 0) {
        fprintf(stderr, "dump_ops: %s\n", err.msg);
        return 1;
    }
    printf("dump_ops: wrote %d tensors to %s\n", g_n, argv[1]);
    for (int i = 0; i < g_n; i++) {
        free((void *)g_t[i].name);
        free((void *)g_t[i].data);
    }
    return 0;
}
