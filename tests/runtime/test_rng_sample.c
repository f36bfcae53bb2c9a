/* The generator (known answers, state save/restore, distributions) and the
 * sampling helper (greedy, temperature, top-k, determinism). */
#include "test_util.h"

static void test_rng(void) {
    /* known answers: xoshiro256** from state {1,2,3,4}, and splitmix64
     * seeding of 0 (values from an independent Python implementation) */
    tlm_rng r = {{1, 2, 3, 4}};
    uint64_t want[4] = {0x2d00, 0x0, 0x5a007080, 0x10e0000000009d80ULL};
    for (int i = 0; i < 4; i++) CHECK(tlm_rng_next(&r) == want[i], "xoshiro output %d", i);
    tlm_rng_seed(&r, 0);
    CHECK(r.s[0] == 0xe220a8397b1dcdafULL && r.s[3] == 0xf88bb8a8724c81ecULL, "splitmix seeding");
    CHECK(tlm_rng_next(&r) == 0x99ec5f36cb75f2b4ULL, "first output for seed 0");

    /* save / load continues bit for bit */
    tlm_rng_seed(&r, 77);
    for (int i = 0; i < 10; i++) tlm_rng_next(&r);
    int64_t st[4];
    tlm_rng_save(&r, st);
    tlm_rng c;
    CHECK(tlm_rng_load(&c, st), "a saved state refused");
    bool same = true;
    for (int i = 0; i < 1000; i++) same &= tlm_rng_next(&r) == tlm_rng_next(&c);
    CHECK(same, "restored state diverges");
    /* the all-zero state (a damaged checkpoint's) is refused, c untouched:
     * xoshiro stays at zero there, and a bounded draw retried forever */
    const int64_t zeros[4] = {0, 0, 0, 0};
    tlm_rng before = c;
    CHECK(!tlm_rng_load(&c, zeros) && !memcmp(&before, &c, sizeof c), "the all-zero state loaded");

    /* distributions */
    enum { N = 200000 };
    static float x[N];
    tlm_rng_seed(&r, 5);
    double s = 0, s2 = 0, umin = 1, umax = 0;
    for (int i = 0; i < N; i++) {
        double u = tlm_rng_uniform(&r);
        s += u;
        umin = fmin(umin, u), umax = fmax(umax, u);
    }
    CHECK(fabs(s / N - 0.5) < 0.005 && umin >= 0 && umax < 1, "uniform mean %.4f", s / N);
    tlm_rng_fill_normal(&r, x, N, 1.0f, 2.0f);
    s = s2 = 0;
    for (int i = 0; i < N; i++) s += x[i], s2 += (double)x[i] * x[i];
    double mean = s / N, var = s2 / N - mean * mean;
    CHECK(fabs(mean - 1.0) < 0.02 && fabs(var - 4.0) < 0.06, "normal mean %.4f var %.4f", mean, var);
    int tail = 0;
    for (int i = 0; i < N; i++) tail += fabs(x[i] - 1.0) > 2.0 * 1.96;
    CHECK(fabs((double)tail / N - 0.05) < 0.004, "normal 5%% tail: %.4f", (double)tail / N);
    s = s2 = 0;
    for (int i = 0; i < N; i++) {
        double z = tlm_rng_normal(&r);
        s += z, s2 += z * z;
    }
    CHECK(fabs(s / N) < 0.01 && fabs(s2 / N - 1.0) < 0.015, "tlm_rng_normal moments");
    tlm_rng_fill_uniform(&r, x, N, -2.0f, 3.0f);
    bool inside = true;
    for (int i = 0; i < N; i++) inside &= x[i] >= -2.0f && x[i] < 3.0f;
    CHECK(inside, "fill_uniform outside [lo, hi)");
    int cnt[7] = {0};
    for (int i = 0; i < 70000; i++) cnt[tlm_rng_below(&r, 7)]++;
    for (int k = 0; k < 7; k++) CHECK(abs(cnt[k] - 10000) < 450, "below(7): %d drew %d", k, cnt[k]);
    CHECK(tlm_rng_below(&r, 1) == 0 && tlm_rng_below(&r, 0) == 0, "below(1), below(0)");
    uint64_t big = (1ULL << 63) + 12345;
    bool ok = true;
    for (int i = 0; i < 1000; i++) ok &= tlm_rng_below(&r, big) < big;
    CHECK(ok, "below(2^63 + k) out of range");
}

static void test_sample(void) {
    enum { V = 10 };
    float logits[V] = {0.5f, 2.0f, -1.0f, 1.9f, 0.0f, 3.0f, -3.0f, 1.0f, 2.5f, 0.1f};
    float scratch[V];
    tlm_rng r;
    tlm_rng_seed(&r, 8);
    CHECK(tlm_sample(logits, V, 0.0f, 0, &r, scratch) == 5, "greedy");
    CHECK(tlm_sample(logits, V, 1.0f, 1, &r, scratch) == 5, "top-1");

    /* frequencies follow softmax(logits / temperature) */
    float temp = 0.7f;
    double p[V], z = 0;
    for (int v = 0; v < V; v++) z += p[v] = exp(logits[v] / temp);
    int cnt[V] = {0}, n = 100000;
    for (int i = 0; i < n; i++) cnt[tlm_sample(logits, V, temp, 0, &r, scratch)]++;
    double worst = 0;
    for (int v = 0; v < V; v++) {
        double want = n * p[v] / z, sd = sqrt(want * (1 - p[v] / z)) + 1;
        worst = fmax(worst, fabs(cnt[v] - want) / sd);
    }
    CHECK(worst < 5, "frequencies off softmax by %.1f sd", worst);

    /* top-k: only the k largest (5, 8, 1 for k = 3), in softmax proportion */
    memset(cnt, 0, sizeof cnt);
    for (int i = 0; i < 30000; i++) cnt[tlm_sample(logits, V, 1.0f, 3, &r, scratch)]++;
    CHECK(cnt[5] + cnt[8] + cnt[1] == 30000, "top-3 sampled outside the top 3");
    double e5 = exp(3.0), e8 = exp(2.5), e1 = exp(2.0), zz = e5 + e8 + e1;
    CHECK(fabs(cnt[5] / 30000.0 - e5 / zz) < 0.015 && fabs(cnt[1] / 30000.0 - e1 / zz) < 0.015, "top-3 proportions");

    /* ties at the cut: exactly k tokens, lower indices first */
    float tied[6] = {1, 2, 2, 2, 0, 2};
    memset(cnt, 0, sizeof cnt);
    for (int i = 0; i < 5000; i++) cnt[tlm_sample(tied, 6, 1.0f, 2, &r, scratch)]++;
    CHECK(cnt[1] > 0 && cnt[2] > 0 && cnt[1] + cnt[2] == 5000, "ties: %d %d %d %d", cnt[1], cnt[2], cnt[3], cnt[5]);

    /* top-k against a sort, on random logits with many sizes of k */
    enum { W = 300 };
    float big[W], scr[W];
    bool okk = true;
    for (int trial = 0; trial < 40; trial++) {
        tlm_rng_fill_normal(&r, big, W, 0.0f, 1.0f);
        int k = 1 + (int)tlm_rng_below(&r, W);
        /* k-th largest by counting */
        float kth = 0;
        for (int i = 0; i < W; i++) {
            int above = 0;
            for (int j = 0; j < W; j++) above += big[j] > big[i];
            if (above == k - 1) kth = big[i];
        }
        for (int i = 0; i < 200; i++) {
            int t = tlm_sample(big, W, 5.0f, k, &r, scr);
            okk &= big[t] >= kth;
        }
    }
    CHECK(okk, "top-k sampled below the k-th largest logit");

    /* determinism for a seed */
    tlm_rng a, b;
    tlm_rng_seed(&a, 123), tlm_rng_seed(&b, 123);
    bool same = true;
    for (int i = 0; i < 1000; i++)
        same &= tlm_sample(logits, V, 0.9f, 4, &a, scratch) == tlm_sample(logits, V, 0.9f, 4, &b, scratch);
    CHECK(same, "sampling not deterministic for a seed");
}

int main(void) {
    test_rng();
    test_sample();
    return test_finish("test_rng_sample");
}
