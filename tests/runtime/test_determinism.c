/* Determinism and an end-to-end training smoke test on the tiny model:
 *  - forward + backward twice: bit-identical loss and gradients;
 *  - the OpenMP-parallel ops give the same bits with 1 and 2 threads
 *    (their sums have a fixed order; OpenBLAS keeps its own thread count:
 *    ctest runs this test on OpenBLAS's pthread build, as the OpenMP build
 *    the runtime links would follow the OpenMP thread count, and how it
 *    splits a GEMM changes the bits),
 *    at a batch where every op's work is past its threshold in ops.h (the
 *    test checks that), so each op really runs on 2 threads;
 *  - AdamW with clipping and a cosine schedule drives the loss on a fixed
 *    batch far down (the pieces fit together and learn). */
#include "test_util.h"
#include "tiny_model.h"

#ifdef _OPENMP
#include <omp.h>
#endif

static void batch(const tiny_model *m, int32_t *ids, int32_t *tgt) {
    /* a learnable sequence: next token = (token * 5 + 3) mod V */
    int N = m->B * m->T;
    for (int i = 0; i < N; i++) {
        ids[i] = (int32_t)((i * 7 + i / m->T) % m->V);
        tgt[i] = (ids[i] * 5 + 3) % m->V;
    }
}

static float *run_once(tiny_model *m, const int32_t *ids, const int32_t *tgt, double *loss) {
    *loss = tiny_forward(m, ids, tgt);
    tiny_backward(m, ids, tgt);
    float *g = falloc(m->nfloats);
    memcpy(g, m->g, m->nfloats * sizeof(float));
    return g;
}

/* The work each OpenMP-parallel op of the tiny model gets, against the
 * threshold from which it splits (ops.h); attention splits over (b, h)
 * pairs at any size. False when one would run on one thread. */
static bool every_op_splits(const tiny_model *m) {
    size_t B = (size_t)m->B, N = B * (size_t)m->T, C = (size_t)m->C, V = (size_t)m->V, H = (size_t)m->H;
    size_t narrow = (size_t)m->layer[0].F, wide = narrow;
    for (int l = 0; l < TINY_L; l++) {
        if ((size_t)m->layer[l].F < narrow) narrow = (size_t)m->layer[l].F;
        if ((size_t)m->layer[l].F > wide) wide = (size_t)m->layer[l].F;
    }
    const struct {
        const char *op;
        size_t work, threshold;
    } ops[] = {
        {"embedding forward: rows", N, TLM_PAR_MIN_ROWS},
        {"rmsnorm: N*C", N * C, TLM_PAR_MIN_NORM},
        {"rope: B*T*H*D", N * C, TLM_PAR_MIN_NORM},
        {"sigmoid gate (elementwise): N*C rows", N * C, TLM_PAR_MIN_ELEMENTS},
        {"cross-entropy: N*V", N * V, TLM_PAR_MIN_ELEMENTS},
        {"MLP backward's activation: N*F, the narrowest layer", N * narrow, TLM_PAR_MIN_ELEMENTS},
        {"MLP backward's activation: N*F, the widest layer", N * wide, TLM_PAR_MIN_ELEMENTS},
        {"attention: (b, h) pairs, 2 threads", B * H, 2},
    };
    bool all = true;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        CHECK(ops[i].work >= ops[i].threshold, "%s = %zu, below the %zu from which it splits over threads", ops[i].op,
              ops[i].work, ops[i].threshold);
        all = all && ops[i].work >= ops[i].threshold;
    }
    return all;
}

int main(void) {
    /* Batch 16 of 128 tokens: past every threshold, and still fast. */
    tiny_model m;
    tiny_init_sized(&m, 11, 0.1f, 16, 128);
    int N = m.B * m.T;
    int32_t *ids = malloc(sizeof(int32_t) * N), *tgt = malloc(sizeof(int32_t) * N);
    batch(&m, ids, tgt);

    double l1, l2;
    float *g1 = run_once(&m, ids, tgt, &l1);
    float *g2 = run_once(&m, ids, tgt, &l2);
    CHECK(l1 == l2 && memcmp(g1, g2, m.nfloats * sizeof(float)) == 0, "two runs differ");
    if (every_op_splits(&m)) printf("  every threaded op splits at batch %d x %d tokens\n", m.B, m.T);
#ifdef _OPENMP
    int threads = omp_get_max_threads(), team = 0;
    omp_set_num_threads(2);
#pragma omp parallel
#pragma omp master
    team = omp_get_num_threads();
    CHECK(team == 2, "OpenMP gave %d threads where 2 were asked for (OMP_THREAD_LIMIT? OMP_DYNAMIC?)", team);
    omp_set_num_threads(1);
    double l3;
    float *g3 = run_once(&m, ids, tgt, &l3);
    omp_set_num_threads(threads > 1 ? threads : 2);
    double l4;
    float *g4 = run_once(&m, ids, tgt, &l4);
    omp_set_num_threads(threads);
    CHECK(l3 == l1 && l4 == l1, "loss depends on the OpenMP thread count");
    CHECK(memcmp(g3, g1, m.nfloats * sizeof(float)) == 0 && memcmp(g4, g1, m.nfloats * sizeof(float)) == 0,
          "gradients depend on the OpenMP thread count");
    printf("  loss and %zu gradients bit-identical: 2 runs, 1 and %d threads\n", m.nfloats, threads > 1 ? threads : 2);
    free(g3), free(g4);
#endif
    free(g1), free(g2), free(ids), free(tgt);
    tiny_free(&m);

    /* training smoke test, at batch 2 of 16 tokens */
    tiny_init(&m, 11, 0.1f);
    N = m.B * m.T;
    ids = malloc(sizeof(int32_t) * N), tgt = malloc(sizeof(int32_t) * N);
    batch(&m, ids, tgt);
    tlm_param_span spans[TINY_MAX_PARAMS];
    int ns = tiny_spans(&m, spans, TINY_MAX_PARAMS);
    float *mom = falloc(m.nfloats), *vel = falloc(m.nfloats);
    tlm_adamw opt = {0.9f, 0.95f, 1e-8f, 0.01f};
    tlm_lr_schedule sched = {TLM_LR_COSINE, 1e-2f, 1e-3f, 5, 60};
    double first = 0, last = 0;
    for (long step = 0; step < 60; step++) {
        double loss = tiny_forward(&m, ids, tgt);
        tiny_backward(&m, ids, tgt);
        tlm_clip_grad_norm(m.g, m.nfloats, 1.0f);
        tlm_adamw_update_spans(&opt, m.p, m.g, 1.0f, mom, vel, spans, ns, tlm_lr_at(&sched, step), step + 1);
        if (step == 0) first = loss;
        last = loss;
    }
    printf("  60 AdamW steps on a fixed batch: loss %.4f -> %.4f (ln V = %.4f)\n", first, last, log((double)m.V));
    CHECK(fabs(first - log((double)m.V)) < 0.5, "initial loss %.3f not near ln V", first);
    CHECK(last < 0.2 * first, "loss did not fall: %.4f -> %.4f", first, last);
    free(mom), free(vel), free(ids), free(tgt);
    tiny_free(&m);
    return test_finish("test_determinism");
}
