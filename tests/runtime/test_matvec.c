/* One token's linear maps (runtime/ops/matvec.c, sampling's products)
 * against a float64 reference: rows below, at and past a thread's block of
 * 64 (1, 3, 4, 5, 37, 64, 65, 130), columns below, at and past the kernel's
 * 8- and 32-float steps (1, 7, 8, 9, 31, 32, 33, 256, 259), a leading
 * dimension past the columns, y overwritten and accumulated; the pair
 * against two single products bit for bit; every result the same bits on
 * 1, 2 and 3 threads; nothing written past y's rows.
 *
 * Bound per row, derived: the first of the four sums adds at most
 * floor(cols / 32) + 3 products in turn (its 32-float steps, then the
 * 8-float ones), then three additions join the sums, three the lanes, and
 * the last cols % 8 products (up to 7) and y's old value come after: at
 * most cols / 32 + 16 roundings of 2^-24 on the row's sum of |w x| and |y|,
 * the standard bound of a float sum (Higham, ch. 3). ctest runs it at the CPU's level and at each lower one
 * (TLM_CPU_CAPABILITY): the baseline build, the AVX2 clone. */
#include "test_util.h"

static const float GUARD = 12345.0f;

typedef struct {
    int rows, cols, ldw;
    bool accumulate;
} shape;

/* y (rows + 1 floats, the last a guard) from y0 */
static void run(float *y, const float *y0, const float *w, const float *x, shape s, int threads) {
    memcpy(y, y0, (size_t)s.rows * sizeof *y);
    y[s.rows] = GUARD;
    tlm_set_num_threads(threads);
    tlm_matvec(y, w, x, s.rows, s.cols, s.ldw, s.accumulate);
}

static void one_case(shape s, tlm_rng *rng) {
    float *w = falloc((size_t)s.rows * (size_t)s.ldw), *x = falloc((size_t)s.cols), *y0 = falloc((size_t)s.rows);
    float *y[3];
    for (int t = 0; t < 3; t++) y[t] = falloc((size_t)s.rows + 1);
    fill_uniform(rng, w, (size_t)s.rows * (size_t)s.ldw, -1.0f, 1.0f);
    fill_uniform(rng, x, (size_t)s.cols, -1.0f, 1.0f);
    fill_uniform(rng, y0, (size_t)s.rows, -4.0f, 4.0f);
    for (int t = 0; t < 3; t++) run(y[t], y0, w, x, s, t + 1);
    const char *how = s.accumulate ? "y +=" : "y =";
    double worst = 0;
    for (int r = 0; r < s.rows; r++) {
        double want = s.accumulate ? y0[r] : 0, magnitude = fabs(want);
        for (int k = 0; k < s.cols; k++) {
            want += (double)w[(size_t)r * s.ldw + k] * x[k];
            magnitude += fabs((double)w[(size_t)r * s.ldw + k] * x[k]);
        }
        const double bound = (s.cols / 32 + 16) * 0x1p-24 * magnitude;
        worst = fmax(worst, fabs(y[0][r] - want) / (bound > 0 ? bound : 1e-30));
    }
    CHECK(worst <= 1.0, "%s W x, rows %d cols %d ldw %d: %.3f of the bound", how, s.rows, s.cols, s.ldw, worst);
    for (int t = 1; t < 3; t++)
        CHECK(!memcmp(y[0], y[t], (size_t)s.rows * sizeof(float)), "%s W x, rows %d cols %d: %d threads differ from 1",
              how, s.rows, s.cols, t + 1);
    for (int t = 0; t < 3; t++)
        CHECK(y[t][s.rows] == GUARD, "%s W x, rows %d cols %d, %d threads: wrote past y", how, s.rows, s.cols, t + 1);
    free(w), free(x), free(y0);
    for (int t = 0; t < 3; t++) free(y[t]);
}

/* tlm_matvec_pair: the two single products' bits, on 1 and 2 threads */
static void pair_case(int rows, int cols, tlm_rng *rng) {
    const size_t n = (size_t)rows * (size_t)cols;
    float *w0 = falloc(n), *w1 = falloc(n), *x = falloc((size_t)cols);
    float *a = falloc((size_t)rows), *b = falloc((size_t)rows), *p0 = falloc((size_t)rows + 1),
          *p1 = falloc((size_t)rows + 1);
    fill_uniform(rng, w0, n, -1.0f, 1.0f);
    fill_uniform(rng, w1, n, -1.0f, 1.0f);
    fill_uniform(rng, x, (size_t)cols, -1.0f, 1.0f);
    tlm_set_num_threads(1);
    tlm_matvec(a, w0, x, rows, cols, cols, false);
    tlm_matvec(b, w1, x, rows, cols, cols, false);
    for (int threads = 1; threads <= 2; threads++) {
        p0[rows] = p1[rows] = GUARD;
        tlm_set_num_threads(threads);
        tlm_matvec_pair(p0, w0, p1, w1, x, rows, cols);
        CHECK(!memcmp(a, p0, (size_t)rows * sizeof(float)) && !memcmp(b, p1, (size_t)rows * sizeof(float)),
              "pair, rows %d cols %d, %d threads: not the single products' bits", rows, cols, threads);
        CHECK(p0[rows] == GUARD && p1[rows] == GUARD, "pair, rows %d cols %d: wrote past y", rows, cols);
    }
    free(w0), free(w1), free(x), free(a), free(b), free(p0), free(p1);
}

int main(void) {
    test_say_cpu_level();
    tlm_rng rng;
    tlm_rng_seed(&rng, 2027);
    static const int rows[] = {1, 3, 4, 5, 37, 64, 65, 130}, cols[] = {1, 7, 8, 9, 31, 32, 33, 256, 259};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        for (size_t j = 0; j < sizeof cols / sizeof cols[0]; j++)
            for (int acc = 0; acc < 2; acc++) {
                one_case((shape){rows[i], cols[j], cols[j], acc}, &rng);
                one_case((shape){rows[i], cols[j], cols[j] + 5, acc}, &rng);
            }
    /* past TLM_PAR_MIN_MATVEC, so that the threads split it: tiny's shapes */
    one_case((shape){768, 256, 256, false}, &rng);
    one_case((shape){256, 1040, 1040, true}, &rng);
    one_case((shape){600, 259, 264, true}, &rng); /* split, with the last columns and a wider row */
    pair_case(1040, 256, &rng);
    pair_case(37, 33, &rng);
    pair_case(601, 259, &rng);
    return test_finish("test_matvec");
}
