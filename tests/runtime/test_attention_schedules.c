/* Attention's forward and backward (runtime/ops/attention.c) give the same
 * bits whichever way their tasks are spread over threads: whole (b, h)
 * pairs a thread in order where the pairs divide evenly among the
 * threads, the longest query blocks first otherwise. Each case runs at 1,
 * 2 and 3 threads, so both schedules run (2 x 2 pairs: in order at 1 and
 * 2 threads, longest first at 3; 1 x 3 pairs the other way round), on
 * odd sizes (context 150 and 77: a last query block of 22 and 13 rows;
 * head size 24 and 40), and the outputs are checked against float64 too
 * (attention_reference.h, test_ops_grad's reference).
 * Without OpenMP there is one thread, and only the in-order schedule. */
#include "test_util.h"

#include "attention_reference.h"

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

static bool same(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof(float)) == 0; }

/* Saturated softmax: each query t is a large multiple of one earlier key
 * k_m(t) (m drawn from 0..t, so in any key block), its score a thousand
 * above the others', so P is exactly one-hot in float and in float64
 * alike. Then y_t is v_m(t) bit for bit, dv_u sums the dy_t of the rows
 * that chose u, and dq and dk are exactly 0 (dS = P (dP - D) with D = dP
 * at the one key). D_t summed in another order than dP_tu left residues
 * that the huge q and k made 1e3 to 1e8 (a diverging run's CPU gradient
 * norm 5e4 times the GPU's and PyTorch's). Head sizes 24 and 72: chunks of
 * 64 channels, and tails that are not whole vectors. */
static void test_saturated(int threads, int D) {
    const int B = 1, T = 150, H = 2, C = H * D, stride = 3 * C;
    const size_t N = (size_t)B * T;
    tlm_rng rng;
    tlm_rng_seed(&rng, 11);
    float *qkv = falloc(N * 3 * C), *dy = falloc(N * C);
    fill_uniform(&rng, qkv, N * 3 * C, -1.0f, 1.0f), fill_uniform(&rng, dy, N * C, -1.0f, 1.0f);
    int *m = malloc(N * H * sizeof *m);
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++) {
            int pick = (int)(tlm_rng_uniform(&rng) * (t + 1));
            m[t * H + h] = pick > t ? t : pick;
            for (int d = 0; d < D; d++) /* q_t = 4000 k_m: its score about 4000 |k|^2 / sqrt(D) above */
                qkv[(size_t)t * stride + h * D + d] = 4000.0f * qkv[(size_t)m[t * H + h] * stride + C + h * D + d];
        }
    att_case c = {B, T, H, D};
    att_out o = run(&c, qkv, dy, threads);
    double worst_qk = 0, worst_dv = 0, mag_dv = 0;
    int y_off = 0;
    for (int h = 0; h < H; h++) {
        for (int t = 0; t < T; t++) {
            const float *v = qkv + (size_t)m[t * H + h] * stride + 2 * C + h * D, *y = o.y + (size_t)t * C + h * D;
            y_off += memcmp(y, v, D * sizeof(float)) != 0;
        }
        for (int u = 0; u < T; u++)
            for (int d = 0; d < D; d++) {
                double want = 0;
                for (int t = u; t < T; t++)
                    if (m[t * H + h] == u) want += dy[(size_t)t * C + h * D + d];
                size_t i = (size_t)u * stride + h * D + d;
                worst_qk = fmax(worst_qk, fmax(fabs(o.dq[i]), fabs(o.dk[i])));
                worst_dv = fmax(worst_dv, fabs(o.dv[i] - want)), mag_dv = fmax(mag_dv, fabs(want));
            }
    }
    printf(
        "  saturated softmax, head size %d, at %d thread(s): y = v of the one key in %d of %d rows, |dq|, |dk| <= %.1e, dv %.1e "
        "(relative)\n",
        D, threads, (int)N * H - y_off, (int)N * H, worst_qk, worst_dv / mag_dv);
    CHECK(y_off == 0, "saturated: y is not the chosen key's v in %d rows", y_off);
    CHECK(worst_qk <= 1e-30, "saturated: dq or dk %.3g where the gradient is exactly 0", worst_qk);
    CHECK(worst_dv <= 1e-6 * mag_dv, "saturated: dv off by %.3g", worst_dv);
    free(o.y), free(o.lse), free(o.dq), free(qkv), free(dy), free(m);
}

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
        att_ctx ref = {c->B, c->T, c->H, c->D, (int)(3 * C), qkv, qkv + C, qkv + 2 * C, one.y, one.lse, dy};
        check_attention_reference(&ref, one.dq, one.dk, one.dv, "attention, 1 thread");
        for (int t = 2; t <= 3; t++) {
            att_out o = run(c, qkv, dy, t);
            CHECK(same(o.y, one.y, N * C) && same(o.lse, one.lse, N * c->H), "B %d H %d: forward at %d threads differs",
                  c->B, c->H, t);
            CHECK(same(o.dq, one.dq, N * 3 * C), "B %d H %d: backward at %d threads differs", c->B, c->H, t);
            free(o.y), free(o.lse), free(o.dq);
        }
        free(one.y), free(one.lse), free(one.dq), free(qkv), free(dy);
    }
    test_saturated(1, 24);
    test_saturated(2, 24);
    test_saturated(1, 72); /* two chunks of channels, the second not a whole vector */
    tlm_set_num_threads(threads);
    check_team_of(3);
    printf("  2 cases at 1, 2 and 3 threads: the same bits, y, lse and gradients within 1e-5 of float64\n");
    return test_finish("test_attention_schedules");
}
