/* Attention's forward and backward (runtime/ops/attention.c) give the same
 * bits whichever way their tasks are spread over threads: whole (b, h)
 * pairs a thread in order where the pairs divide evenly among the
 * threads, the longest query blocks first otherwise. Each case runs at 1,
 * 2 and 3 threads, so both schedules run (2 x 2 pairs: in order at 1 and
 * 2 threads, longest first at 3; 1 x 3 pairs the other way round), on
 * odd sizes (context 150 and 77: a last query block of 22 and 13 rows;
 * head size 24 and 40), and y and lse are checked against a float64
 * softmax attention too (the backward against float64: test_ops_grad).
 * Without OpenMP there is one thread, and only the in-order schedule. */
#include "test_util.h"

typedef struct {
    int B, T, H, D;
} att_case;

typedef struct {
    float *y, *lse, *dq, *dk, *dv;
} att_out;

/* q, k, v interleaved per token as the model's qkv buffer holds them */
static att_out run(const att_case *c, const float *qkv, const float *dy, int threads) {
    const size_t N = (size_t)c->B * c->T, C = (size_t)c->H * c->D;
    att_out o = {falloc(N * C), falloc(N * c->H), falloc(N * 3 * C), NULL, NULL};
    o.dk = o.dq + C, o.dv = o.dq + 2 * C;
    tlm_set_num_threads(threads);
    tlm_attention_forward(o.y, o.lse, qkv, qkv + C, qkv + 2 * C, c->B, c->T, c->H, c->D, (int)(3 * C));
    tlm_attention_backward(o.dq, o.dk, o.dv, dy, o.y, o.lse, qkv, qkv + C, qkv + 2 * C, c->B, c->T, c->H, c->D,
                           (int)(3 * C));
    return o;
}

/* The largest error of y (causal softmax(q k^T / sqrt(D)) v) and of lse
 * (the log of each row's softmax sum, max included) against float64. */
static double max_error(const att_case *c, const float *qkv, const float *y, const float *lse) {
    const size_t C = (size_t)c->H * c->D, S = 3 * C;
    double worst = 0.0, *p = malloc(sizeof(double) * (size_t)c->T);
    if (!p) exit(2);
    for (int b = 0; b < c->B; b++)
        for (int h = 0; h < c->H; h++)
            for (int t = 0; t < c->T; t++) {
                const float *q = qkv + ((size_t)b * c->T + t) * S + (size_t)h * c->D;
                double mx = -INFINITY, sum = 0.0;
                for (int u = 0; u <= t; u++) {
                    const float *k = qkv + ((size_t)b * c->T + u) * S + C + (size_t)h * c->D;
                    double s = 0.0;
                    for (int d = 0; d < c->D; d++) s += (double)q[d] * k[d];
                    p[u] = s / sqrt((double)c->D);
                    mx = fmax(mx, p[u]);
                }
                for (int u = 0; u <= t; u++) sum += p[u] = exp(p[u] - mx);
                worst = fmax(worst, fabs(lse[((size_t)b * c->T + t) * c->H + h] - (mx + log(sum))));
                for (int d = 0; d < c->D; d++) {
                    double want = 0.0;
                    for (int u = 0; u <= t; u++)
                        want += p[u] / sum * qkv[((size_t)b * c->T + u) * S + 2 * C + (size_t)h * c->D + d];
                    double got = y[((size_t)b * c->T + t) * C + (size_t)h * c->D + d];
                    worst = fmax(worst, fabs(got - want));
                }
            }
    free(p);
    return worst;
}

static bool same(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof(float)) == 0; }

int main(void) {
    const att_case cases[] = {{2, 150, 2, 24}, {1, 77, 3, 40}};
    tlm_rng rng;
    tlm_rng_seed(&rng, 5);
    const int threads = tlm_get_num_threads();
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const att_case *c = &cases[i];
        const size_t N = (size_t)c->B * c->T, C = (size_t)c->H * c->D;
        float *qkv = falloc(N * 3 * C), *dy = falloc(N * C);
        fill_uniform(&rng, qkv, N * 3 * C, -1.0f, 1.0f), fill_uniform(&rng, dy, N * C, -1.0f, 1.0f);
        att_out one = run(c, qkv, dy, 1);
        double err = max_error(c, qkv, one.y, one.lse);
        CHECK(err < 1e-5, "B %d T %d H %d D %d: y or lse off float64 by %.3g", c->B, c->T, c->H, c->D, err);
        for (int t = 2; t <= 3; t++) {
            att_out o = run(c, qkv, dy, t);
            CHECK(same(o.y, one.y, N * C) && same(o.lse, one.lse, N * c->H), "B %d H %d: forward at %d threads differs",
                  c->B, c->H, t);
            CHECK(same(o.dq, one.dq, N * 3 * C), "B %d H %d: backward at %d threads differs", c->B, c->H, t);
            free(o.y), free(o.lse), free(o.dq);
        }
        free(one.y), free(one.lse), free(one.dq), free(qkv), free(dy);
    }
    tlm_set_num_threads(threads);
    check_team_of(3);
    printf("  2 cases at 1, 2 and 3 threads: the same bits, y and lse within 1e-5 of float64\n");
    return test_finish("test_attention_schedules");
}
