/* RMSNorm's backward (runtime/ops/rmsnorm.c), which sweeps the rows once
 * for dx and dw together, against plain loops:
 *  - dw bit for bit against a scalar sum in double over the rows in row
 *    order (the sums the op is defined by: (dy_i x_i) r per row), added to
 *    what dw held;
 *  - dx against a float64 reference (its row dot has eight partial sums,
 *    so not bit for bit), added to dx (the model norm) or written (per head);
 *  - every output the same bits at 1, 2 and 3 threads;
 * on odd sizes: 1 and 37 rows; a model norm of 2,100 entries (33 blocks
 * of dw: two sweeps, the last block 52 wide) and of 7; per-head norms of
 * 3 x 45 and of 40 heads x 64 (40 blocks, two sweeps, each row's head
 * among them); and, threaded, a second part that sweeps twice (4,200
 * entries: 66 blocks), more parts than rows (2 rows of 8,200) and than
 * blocks (300 rows of 64). */
#include "test_util.h"

typedef struct {
    int N, H, D; /* H = 0: the model norm, rows of D */
} norm_case;

typedef struct {
    float *dx, *dw;
} grads;

static int rows_of(const norm_case *c) { return c->H ? c->N * c->H : c->N; }
static int heads_of(const norm_case *c) { return c->H ? c->H : 1; }

/* The op at `threads` threads, from dx and dw as given (the model norm adds
 * to both). */
static grads run_op(const norm_case *c, const float *dy, const float *x, const float *w, const float *rstd,
                    const float *dx0, const float *dw0, int threads) {
    size_t n = (size_t)rows_of(c) * (size_t)c->D, nw = (size_t)heads_of(c) * (size_t)c->D;
    grads g = {falloc(n), falloc(nw)};
    memcpy(g.dx, dx0, n * sizeof(float)), memcpy(g.dw, dw0, nw * sizeof(float));
    tlm_set_num_threads(threads);
    if (c->H) tlm_rmsnorm_heads_backward(g.dx, g.dw, dy, x, w, rstd, c->N, c->H, c->D);
    else tlm_rmsnorm_backward(g.dx, g.dw, dy, x, w, rstd, c->N, c->D);
    return g;
}

static void test_case(const norm_case *c, tlm_rng *rng) {
    const int R = rows_of(c), H = heads_of(c), D = c->D;
    size_t n = (size_t)R * (size_t)D, nw = (size_t)H * (size_t)D;
    float *x = falloc(n), *dy = falloc(n), *w = falloc(nw), *dx0 = falloc(n), *dw0 = falloc(nw), *y = falloc(n);
    float *rstd = falloc((size_t)R);
    fill_uniform(rng, x, n, -2.0f, 2.0f), fill_uniform(rng, dy, n, -1.0f, 1.0f);
    fill_uniform(rng, w, nw, 0.5f, 1.5f), fill_uniform(rng, dx0, n, -1.0f, 1.0f), fill_uniform(rng, dw0, nw, -1, 1);
    if (c->H) tlm_rmsnorm_heads_forward(y, rstd, x, w, c->N, c->H, D, 1e-5f);
    else tlm_rmsnorm_forward(y, rstd, x, w, c->N, D, 1e-5f);

    /* dw: row r's head is r % H; each entry sums its rows in order */
    float *want_dw = falloc(nw);
    for (int h = 0; h < H; h++)
        for (int i = 0; i < D; i++) {
            double acc = 0.0;
            for (int r = h; r < R; r += H)
                acc += (double)dy[(size_t)r * D + i] * (double)x[(size_t)r * D + i] * (double)rstd[r];
            want_dw[(size_t)h * D + i] = dw0[(size_t)h * D + i] + (float)acc;
        }
    /* dx = r g - r^3 x (g . x) / D, g = dy w, in double */
    float *want_dx = falloc(n);
    for (int r = 0; r < R; r++) {
        const float *wr = w + (size_t)(r % H) * D, *xr = x + (size_t)r * D, *gr = dy + (size_t)r * D;
        double dot = 0.0, rs = rstd[r];
        for (int i = 0; i < D; i++) dot += (double)gr[i] * wr[i] * xr[i];
        for (int i = 0; i < D; i++) {
            double v = rs * gr[i] * wr[i] - rs * rs * rs * xr[i] * dot / D;
            want_dx[(size_t)r * D + i] = (float)(c->H ? v : dx0[(size_t)r * D + i] + v);
        }
    }

    grads one = run_op(c, dy, x, w, rstd, dx0, dw0, 1);
    char what[64];
    snprintf(what, sizeof what, "N %d, H %d, D %d", c->N, c->H, D);
    CHECK(memcmp(one.dw, want_dw, nw * sizeof(float)) == 0, "%s: dw differs from the row-order double sums", what);
    double e = rel_err(one.dx, want_dx, n);
    CHECK(e < 1e-5, "%s: dx relative error %.3g against float64", what, e);
    for (int t = 2; t <= 3; t++) {
        grads more = run_op(c, dy, x, w, rstd, dx0, dw0, t);
        CHECK(memcmp(more.dx, one.dx, n * sizeof(float)) == 0 && memcmp(more.dw, one.dw, nw * sizeof(float)) == 0,
              "%s: %d threads give other bits than 1", what, t);
        free(more.dx), free(more.dw);
    }
    free(one.dx), free(one.dw), free(want_dx), free(want_dw);
    free(x), free(dy), free(w), free(dx0), free(dw0), free(y), free(rstd);
}

int main(void) {
    tlm_rng rng;
    tlm_rng_seed(&rng, 17);
    const norm_case cases[] = {{37, 0, 2100}, {1, 0, 2100},  {37, 0, 7},   {37, 3, 45}, {37, 40, 64},
                               {1, 40, 64},   {37, 0, 4200}, {2, 0, 8200}, {300, 0, 64}};
    int threads = tlm_get_num_threads();
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) test_case(&cases[i], &rng);
    tlm_set_num_threads(threads);
    check_team_of(3);
    printf("  %zu cases: dw bit for bit with row-order double sums, dx within 1e-5 of float64, same bits at 1-3 "
           "threads\n",
           sizeof cases / sizeof *cases);
    return test_finish("test_rmsnorm_backward");
}
