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
    tlm_set_num_threads(threads);
    check_team_of(3);
    printf("  2 cases at 1, 2 and 3 threads: the same bits, y, lse and gradients within 1e-5 of float64\n");
    return test_finish("test_attention_schedules");
}
