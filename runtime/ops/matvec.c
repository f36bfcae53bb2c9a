/* One token's linear maps (sampling with a KV cache): y = W x, W [rows,
 * cols] with leading dimension ldw.
 *
 * A decoded token reads every weight once and does one multiply-add with
 * it, so the product is bound by how fast the weights stream from cache
 * or memory. OpenBLAS's sgemv reached that rate on a whole matrix, but a
 * decoded token made about a dozen calls a layer (the MLP's down
 * projection in 128-column strips), each a parallel region of its own at
 * two threads, where its per-call costs and the threads' wake-ups came to
 * more than the products (bench/sample_bench.sh; docs/performance.md).
 *
 * Here each row is one dot product with four sums (independent
 * multiply-add chains, enough to keep up with the loads), and threads take
 * whole blocks of rows: a row's sum is the same on any number of threads,
 * so a sampled text does not depend on the thread count. */
#include "tlm_rt/ops.h"
#include "vec8.h"

/* The sum of a row's four vector sums and its last cols % 8 products
 * (vectors by pointer: they never cross a call, vec8.h). */
V8_ALWAYS_INLINE float finish(const v8f *a, const v8f *b, const v8f *c, const v8f *d, const float *w, const float *x,
                              int from, int cols) {
    v8f s = (*a + *b) + (*c + *d);
    float sum = ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
    for (int k = from; k < cols; k++) sum += w[k] * x[k];
    return sum;
}

/* Rows [r0, r1), one after another: the weights stream through in the
 * order they lie (four rows side by side, tried first, ran 0.79 ms
 * against 0.61 for six of tiny's layers read from memory: the hardware
 * prefetcher follows one stream better than four). */
V8_KERNEL(matvec_rows, (float *y, const float *w, const float *x, int r0, int r1, int cols, size_t ldw, bool add),
          (y, w, x, r0, r1, cols, ldw, add)) {
    for (int r = r0; r < r1; r++) {
        const float *wr = w + (size_t)r * ldw;
        v8f a = V8_SPLAT(0.0f), b = a, c = a, d = a;
        int k = 0;
        for (; k + 32 <= cols; k += 32) {
            v8f x0, x1, x2, x3, p0, p1, p2, p3;
            V8_LOAD(x0, x + k), V8_LOAD(x1, x + k + 8), V8_LOAD(x2, x + k + 16), V8_LOAD(x3, x + k + 24);
            V8_LOAD(p0, wr + k), V8_LOAD(p1, wr + k + 8), V8_LOAD(p2, wr + k + 16), V8_LOAD(p3, wr + k + 24);
            a += p0 * x0, b += p1 * x1, c += p2 * x2, d += p3 * x3;
        }
        for (; k + 8 <= cols; k += 8) {
            v8f x0, p0;
            V8_LOAD(x0, x + k), V8_LOAD(p0, wr + k), a += p0 * x0;
        }
        const float s = finish(&a, &b, &c, &d, wr, x, k, cols);
        y[r] = add ? y[r] + s : s;
    }
}

/* count products of the same shape and x, in one parallel region: blocks
 * of 64 rows, matrix after matrix, split between the threads. */
static void matvecs(int count, float *const *y, const float *const *w, const float *x, int rows, int cols, int ldw,
                    bool accumulate) {
    enum { BLOCK = 64 };
    const int per = (rows + BLOCK - 1) / BLOCK, blocks = count * per;
    TLM_PARALLEL_FOR_IF((size_t)count * (size_t)rows * (size_t)cols >= TLM_PAR_MIN_MATVEC && blocks > 1,
                        for (int b = 0; b < blocks; b++) {
                            const int i = b / per, r0 = (b % per) * BLOCK, r1 = r0 + BLOCK < rows ? r0 + BLOCK : rows;
                            matvec_rows(y[i], w[i], x, r0, r1, cols, (size_t)ldw, accumulate);
                        });
}

void tlm_matvec(float *y, const float *w, const float *x, int rows, int cols, int ldw, bool accumulate) {
    if (rows > 0) matvecs(1, &y, &w, x, rows, cols, ldw, accumulate);
}

void tlm_matvec_pair(float *y0, const float *w0, float *y1, const float *w1, const float *x, int rows, int cols) {
    if (rows > 0) matvecs(2, (float *const[]){y0, y1}, (const float *const[]){w0, w1}, x, rows, cols, cols, false);
}
