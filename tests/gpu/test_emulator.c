/* gpu.emulator: the CUDA emulator (runtime/device/cuda_emu.h) on the kernels
 * of emulator_kernels.cu, compiled here with the host C++ compiler as the
 * emulated device compiles a module (the header included first, one
 * TLM_EMU_EXPORT per kernel), under -Wall -Wextra -Werror, and with a second
 * compiler (clang++) when there is one. Checks block reductions with
 * barriers and shuffles for 32..1024 threads and odd sizes, each shuffle and
 * vote against its CUDA definition, 3-D indices, grid-stride loops under the
 * permuted block order, threads that return early, the errors (bad launch
 * shapes, warp operations that cannot complete, __trap) and that launches
 * work again after them, bf16 conversions against a reference written
 * differently; prints the launch rate of a 256-thread block with 8 barriers. */
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef TLM_EMU_TEST_CXX
#define TLM_EMU_TEST_CXX ""
#endif
#ifndef TLM_EMU_TEST_CLANGXX
#define TLM_EMU_TEST_CLANGXX ""
#endif

typedef int (*launch_fn)(const unsigned grid[3], const unsigned block[3], unsigned shared_bytes, void **args, char *err,
                         size_t errlen);

static void *lib;
static int failures;

static void check(int ok, const char *what) {
    if (!ok) failures++;
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
}

static const char *kernels[] = {
    "emu_row_sums",
    "emu_shuffles",
    "emu_indices",
    "emu_axpy",
    "emu_block_order",
    "emu_block_chain",
    "emu_early_exit",
    "emu_barriers",
    "emu_exit_then_shuffle",
    "emu_barrier_in_shuffle",
    "emu_split_warp",
    "emu_trap",
    "emu_bf16",
    "emu_bf16_ops",
    "emu_math",
    "emu_barrier_votes",
    "emu_missing_barrier",
    "emu_uninit_shared",
    "emu_dynamic_shared",
    "emu_warp_ahead",
};

/* Launches kernel `name` with shared_bytes of dynamic shared memory;
 * returns its status, the message in err. */
static int launch_shared(const char *name, const unsigned grid[3], const unsigned block[3], unsigned shared_bytes,
                         void **args, char *err, size_t errlen) {
    char sym[128];
    snprintf(sym, sizeof sym, "tlm_emu_launch_%s", name);
    launch_fn fn = (launch_fn)(uintptr_t)dlsym(lib, sym);
    if (!fn) {
        snprintf(err, errlen, "no entry point %s", sym);
        return -1;
    }
    err[0] = 0;
    return fn(grid, block, shared_bytes, args, err, errlen);
}
static int launch(const char *name, const unsigned grid[3], const unsigned block[3], void **args, char *err,
                  size_t errlen) {
    return launch_shared(name, grid, block, 0, args, err, errlen);
}

/* A launch that must succeed. */
static int run(const char *name, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
               void **args) {
    const unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
    char err[512];
    int rc = launch(name, grid, block, args, err, sizeof err);
    if (rc) printf("FAIL %s: %s\n", name, err);
    return rc == 0;
}

/* Block sums of rows of small integers (exact in any order), the xor and
 * the down reductions, for block sizes 32..1024 and odd row lengths. */
static void test_row_sums(void) {
    const unsigned blocks[] = {32, 64, 96, 256, 1024};
    const int lengths[] = {1, 31, 33, 1023, 4097};
    int bad = 0, runs = 0;
    for (size_t bi = 0; bi < sizeof blocks / sizeof blocks[0]; bi++)
        for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++)
            for (int down = 0; down < 2; down++) {
                int rows = 5, n = lengths[li];
                float *x = malloc(sizeof(float) * (size_t)rows * n), out[5];
                double want[5] = {0};
                for (int r = 0; r < rows; r++)
                    for (int i = 0; i < n; i++) {
                        x[(size_t)r * n + i] = (float)((r * 7 + i * 13) % 17 - 8);
                        want[r] += x[(size_t)r * n + i];
                    }
                const float *xp = x;
                float *op = out;
                void *args[] = {&xp, &rows, &n, &down, &op};
                /* 3 blocks for 5 rows: blocks stride over the rows. */
                if (!run("emu_row_sums", 3, 1, 1, blocks[bi], 1, 1, args)) bad++;
                for (int r = 0; r < rows; r++)
                    if (out[r] != (float)want[r]) {
                        if (bad < 5)
                            printf("     row sum: block %u n %d %s row %d: %g, want %g\n", blocks[bi], n,
                                   down ? "down" : "xor", r, out[r], want[r]);
                        bad++;
                    }
                runs++;
                free(x);
            }
    char what[160];
    snprintf(what, sizeof what, "block sums: %d launches (32..1024 threads, rows of 1..4097), %d wrong", runs, bad);
    check(bad == 0, what);
}

/* Each shuffle and vote against CUDA's definition, 3 blocks of 96 threads. */
static int lane_value(int lane, int warp, int block) { return lane * 10 + warp * 1000 + block * 100000; }

static void test_shuffles(void) {
    enum { BLOCKS = 3, THREADS = 96, K = 16 };
    static int out[BLOCKS * THREADS * K];
    int *op = out;
    void *args[] = {&op};
    int ok = run("emu_shuffles", BLOCKS, 1, 1, THREADS, 1, 1, args), bad = 0;
    unsigned ballot = 0;
    for (int l = 0; l < 32; l += 3) ballot |= 1u << l;
    for (int b = 0; b < BLOCKS; b++)
        for (int t = 0; t < THREADS; t++) {
            int l = t % 32, w = t / 32;
#define V(lane) lane_value(lane, w, b)
            int want[K] = {
                V(l ^ 1),
                V(l ^ 16),
                l + 1 < 32 ? V(l + 1) : V(l),
                l + 5 < 32 ? V(l + 5) : V(l),
                l >= 1 ? V(l - 1) : V(l),
                l >= 7 ? V(l - 7) : V(l),
                V((l * 7 + 3) % 32),
                V(31 - l),
                l % 8 + 3 < 8 ? V(l + 3) : V(l), /* width 8 */
                l % 8 >= 2 ? V(l - 2) : V(l),
                (l & 4) ? V(l - 4) : V(l), /* width 4: a later segment gives the own value */
                V((l & ~15) + 5),
                (int)ballot,
                1, /* any(lane 17), not all(lane < 31) */
                V(l ^ 8),
                V(l), /* delta 40: out of range */
            };
#undef V
            for (int k = 0; k < K; k++)
                if (out[(b * THREADS + t) * K + k] != want[k]) {
                    if (bad < 5)
                        printf("     shuffle %d, block %d thread %d: %d, want %d\n", k, b, t,
                               out[(b * THREADS + t) * K + k], want[k]);
                    bad++;
                }
        }
    char what[160];
    snprintf(what, sizeof what, "shuffles and votes: %d results (16 kinds x %d lanes), %d wrong", BLOCKS * THREADS * K,
             BLOCKS * THREADS, bad);
    check(ok && bad == 0, what);
}

/* threadIdx, blockIdx, blockDim, gridDim of every thread of a 3-D launch. */
static void test_indices(void) {
    const unsigned g[3] = {3, 2, 2}, bl[3] = {32, 3, 2};
    size_t threads = (size_t)g[0] * g[1] * g[2] * bl[0] * bl[1] * bl[2];
    unsigned *out = malloc(sizeof(unsigned) * 12 * threads);
    memset(out, 0xff, sizeof(unsigned) * 12 * threads);
    void *args[] = {&out};
    int ok = run("emu_indices", g[0], g[1], g[2], bl[0], bl[1], bl[2], args), bad = 0;
    for (unsigned bz = 0; bz < g[2]; bz++)
        for (unsigned by = 0; by < g[1]; by++)
            for (unsigned bx = 0; bx < g[0]; bx++)
                for (unsigned tz = 0; tz < bl[2]; tz++)
                    for (unsigned ty = 0; ty < bl[1]; ty++)
                        for (unsigned tx = 0; tx < bl[0]; tx++) {
                            size_t b = bx + g[0] * (by + g[1] * bz), t = tx + bl[0] * (ty + bl[1] * tz);
                            const unsigned *o = out + 12 * (b * bl[0] * bl[1] * bl[2] + t);
                            unsigned want[12] = {tx, ty, tz, bx, by, bz, bl[0], bl[1], bl[2], g[0], g[1], g[2]};
                            if (memcmp(o, want, sizeof want)) bad++;
                        }
    char what[160];
    snprintf(what, sizeof what, "3-D indices: grid (3,2,2), block (32,3,2), %zu threads, %d wrong", threads, bad);
    check(ok && bad == 0, what);
    free(out);
}

/* A grid-stride loop is right under any block order; the order itself is a
 * fixed permutation, not 0, 1, 2, ...; a kernel that depends on it breaks. */
static void test_block_order(void) {
    long long n = 10007;
    float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n);
    for (long long i = 0; i < n; i++) x[i] = (float)(i % 101), y[i] = (float)(i % 7);
    void *args[] = {&x, &y, &n};
    int ok = run("emu_axpy", 7, 1, 1, 64, 1, 1, args), bad = 0;
    for (long long i = 0; i < n; i++)
        if (y[i] != 2.0f * (float)(i % 101) + (float)(i % 7)) bad++;
    char what[160];
    snprintf(what, sizeof what, "grid-stride axpy: 7 blocks of 64 over %lld elements, %d wrong", n, bad);
    check(ok && bad == 0, what);
    free(x);
    free(y);

    enum { G = 12 };
    int order[2][G], seen[G] = {0}, identity = 1, same = 1, counter;
    for (int rep = 0; rep < 2; rep++) {
        counter = 0;
        int *c = &counter, *o = order[rep];
        void *a[] = {&c, &o};
        ok &= run("emu_block_order", G, 1, 1, 32, 1, 1, a);
    }
    for (int b = 0; b < G; b++) {
        if (order[0][b] >= 0 && order[0][b] < G) seen[order[0][b]]++;
        identity &= order[0][b] == b;
        same &= order[0][b] == order[1][b];
    }
    int permutation = 1;
    for (int b = 0; b < G; b++) permutation &= seen[b] == 1;
    printf("     block order of %d blocks:", G);
    for (int b = 0; b < G; b++) printf(" %d", order[0][b]);
    printf("\n");
    check(ok && permutation && !identity && same, "block order: a fixed permutation, not the identity");

    int chain[G] = {0}, *cp = chain, in_order = 1;
    void *ca[] = {&cp};
    ok = run("emu_block_chain", G, 1, 1, 32, 1, 1, ca);
    for (int b = 0; b < G; b++) in_order &= chain[b] == b + 1;
    check(ok && !in_order, "a kernel that depends on the block order gets wrong results");
}

/* A kernel missing a barrier gets wrong results, whether threads read the
 * next thread's value or the previous one's: one block takes its turns in
 * ascending order, the next in descending order, so in one of the two
 * every thread but one reads before its neighbour writes. */
static void test_missing_barrier(void) {
    enum { B = 64 };
    for (int step = -1; step <= 1; step += 2) {
        float out[2 * B], *op = out;
        void *args[] = {&step, &op};
        int ok = run("emu_missing_barrier", 2, 1, 1, B, 1, 1, args), wrong = 0;
        for (int b = 0; b < 2; b++)
            for (int t = 0; t < B; t++) wrong += out[b * B + t] != (float)((t + B + step) % B + 1000 * b);
        char what[160];
        snprintf(what, sizeof what, "a missing barrier (reading thread t%+d) gives wrong results: %d of %d", step,
                 wrong, 2 * B);
        check(ok && wrong >= B - 1, what); /* all but one thread of a block */
    }
}

/* Shared memory holds 0xff bytes when a block starts: a float NaN, an int
 * -1, whatever the previous block (or launch) wrote. */
static void test_uninit_shared(void) {
    float out[3 * 128], *op = out;
    void *args[] = {&op};
    int ok = 1, bad = 0;
    for (int rep = 0; rep < 2; rep++) {
        ok &= run("emu_uninit_shared", 3, 1, 1, 64, 1, 1, args);
        for (int b = 0; b < 3; b++)
            for (int t = 0; t < 64; t++) bad += !isnan(out[b * 128 + t]) || out[b * 128 + 64 + t] != -1.0f;
    }
    char what[160];
    snprintf(what, sizeof what, "unwritten shared memory reads as NaN / -1 in every block: %d wrong of %d", bad,
             2 * 3 * 128);
    check(ok && bad == 0, what);
}

/* One order of the four (cuda_emu.h: warp by warp, ascending) lets a warp
 * run ahead to its next barrier: a buffer refilled before another warp's
 * reads are over gives wrong results in that block, and only there (the
 * four blocks run in the four orders, one each). */
static void test_warp_ahead(void) {
    enum { BLOCKS = 4 };
    float out[BLOCKS * 32], *op = out;
    void *args[] = {&op};
    int ok = run("emu_warp_ahead", BLOCKS, 1, 1, 64, 1, 1, args), wrong = 0;
    for (int b = 0; b < BLOCKS; b++)
        for (int l = 0; l < 32; l++) wrong += out[b * 32 + l] != 1.0f + (float)l;
    char what[200];
    snprintf(what, sizeof what, "a warp running ahead past a missing barrier: wrong in one block of 4 (%d of %d)",
             wrong, BLOCKS * 32);
    check(ok && wrong == 32, what);
}

/* Dynamic shared memory: as large as the launch asks (an odd size past
 * 48 KiB, then a smaller one on the same thread), poisoned before every
 * block like the static kind, shared by the block's threads. */
static void test_dynamic_shared(void) {
    enum { T = 64, BLOCKS = 3 };
    float out[BLOCKS * 3 * T], *op = out;
    void *args[] = {&op};
    const unsigned grid[3] = {BLOCKS, 1, 1}, block[3] = {T, 1, 1}, sizes[] = {64 * 1024 + 4, 1024};
    int ok = 1, bad = 0;
    for (int rep = 0; rep < 2; rep++) {
        char err[512];
        int rc = launch_shared("emu_dynamic_shared", grid, block, sizes[rep], args, err, sizeof err);
        if (rc) printf("FAIL emu_dynamic_shared: %s\n", err);
        ok &= rc == 0;
        for (int b = 0; b < BLOCKS; b++)
            for (int t = 0; t < T; t++) {
                const float *o = out + b * 3 * T;
                bad += !isnan(o[t]) || o[T + t] != (float)(b * 1000 + (T - 1 - t)) || o[2 * T + t] != (float)sizes[rep];
            }
    }
    char what[200];
    snprintf(what, sizeof what,
             "dynamic shared memory of 65540 and 1024 bytes: poisoned per block, shared, its size (%d wrong of %d)",
             bad, 2 * BLOCKS * 3 * T);
    check(ok && bad == 0, what);
}

/* Threads returning early count as arrived at later barriers. */
static void test_early_exit(void) {
    const int cases[][2] = {{64, 40}, {256, 255}, {1024, 33}, {96, 32}};
    int bad = 0, ok = 1;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int threads = cases[c][0], alive = cases[c][1];
        float *out = malloc(sizeof(float) * 2 * threads);
        for (int i = 0; i < 2 * threads; i++) out[i] = -1.0f;
        void *args[] = {&alive, &out};
        ok &= run("emu_early_exit", 2, 1, 1, (unsigned)threads, 1, 1, args);
        for (int b = 0; b < 2; b++)
            for (int t = 0; t < threads; t++) {
                float got = out[b * threads + t], want = -1.0f;
                if (t < alive) {
                    /* v_j = s0[(j+1) % alive] = (j+1) % alive + 1; s1[j] = 2 v_j. */
                    int j = (t + 3) % alive, vt = t < 32 ? t ^ 1 : t;
                    float v = (float)((vt + 1) % alive + 1);
                    want = 2.0f * (float)((j + 1) % alive + 1) + (float)(alive / 2) + 1000.0f * v;
                }
                if (got != want) {
                    if (bad < 5) printf("     early exit %d/%d thread %d: %g, want %g\n", alive, threads, t, got, want);
                    bad++;
                }
            }
        free(out);
    }
    char what[160];
    snprintf(what, sizeof what, "early exit: 4 shapes (40 of 64 .. 33 of 1024 threads alive), %d wrong", bad);
    check(ok && bad == 0, what);
}

/* __syncthreads_and/_or/_count vote over the threads that arrive. */
static void test_barrier_votes(void) {
    int out[64], *op = out, bad = 0;
    for (int t = 0; t < 64; t++) out[t] = -1;
    void *args[] = {&op};
    int ok = run("emu_barrier_votes", 1, 1, 1, 64, 1, 1, args);
    /* and(all) = 1, or(one) = 1, and(all but one) = 0, count(t % 3 == 0 of 0..47) = 16. */
    for (int t = 0; t < 64; t++) bad += out[t] != (t < 48 ? 1 | 2 | 16 << 3 : -1);
    check(ok && bad == 0, "barrier votes (_and, _or, _count) over the 48 threads that arrive");
}

/* A launch that must fail with a message containing `want`. */
static void expect_error(const char *name, const unsigned grid[3], const unsigned block[3], const char *want) {
    float out[2048];
    float *op = out;
    void *args[] = {&op};
    char err[512], what[700];
    int rc = launch(name, grid, block, args, err, sizeof err);
    snprintf(what, sizeof what, "%s fails: \"%s\"", name, err);
    check(rc != 0 && strstr(err, want) != NULL, what);
    if (!strstr(err, want)) printf("     expected the message to contain \"%s\"\n", want);
}

static void test_errors(void) {
    const unsigned one[3] = {1, 1, 1}, four[3] = {4, 1, 1}, b64[3] = {64, 1, 1}, b256[3] = {256, 1, 1};
    const unsigned zero_grid[3] = {2, 0, 1}, zero_block[3] = {32, 1, 0}, big[3] = {1056, 1, 1}, odd[3] = {48, 1, 1},
                   wide[3] = {32, 33, 1}, tall_grid[3] = {1, 65536, 1};
    expect_error("emu_indices", zero_grid, b64, "has a zero dimension");
    expect_error("emu_indices", one, zero_block, "has a zero dimension");
    expect_error("emu_indices", one, big, "more than 1024 threads");
    expect_error("emu_indices", one, wide, "more than 1024 threads");
    expect_error("emu_indices", one, odd, "not a multiple of 32");
    expect_error("emu_indices", tall_grid, b64, "over CUDA's limits");
    expect_error("emu_exit_then_shuffle", four, b64,
                 "warp shuffle in kernel emu_exit_then_shuffle: lane 7 of warp 1 of block (3,0,0) has exited");
    expect_error("emu_barrier_in_shuffle", one, b64,
                 "warp shuffle in kernel emu_barrier_in_shuffle: lane 5 of warp 0 of block (0,0,0) waits at "
                 "__syncthreads");
    expect_error("emu_split_warp", one, b64, "are at different warp operations");
    expect_error("emu_trap", four, b256, "kernel emu_trap: __trap in thread (33,0,0) of block (1,0,0)");
    /* A short buffer gets a truncated message, not an overflow. */
    char small[8];
    float out[64], *op = out;
    void *args[] = {&op};
    int rc = launch("emu_exit_then_shuffle", four, b64, args, small, sizeof small);
    check(rc != 0 && strlen(small) == sizeof small - 1, "an error message is cut to the buffer");
}

/* After the failed launches (fibers abandoned inside kernels), launches work. */
static void test_after_errors(void) {
    int rows = 3, n = 1001, down = 0;
    float x[3 * 1001], out[3];
    for (int i = 0; i < rows * n; i++) x[i] = (float)(i % 5);
    const float *xp = x;
    float *op = out;
    void *args[] = {&xp, &rows, &n, &down, &op};
    int ok = run("emu_row_sums", 2, 1, 1, 1024, 1, 1, args);
    for (int r = 0; r < rows; r++) {
        double want = 0;
        for (int i = 0; i < n; i++) want += x[r * n + i];
        ok &= out[r] == (float)want;
    }
    check(ok, "launches after the failed ones are right (1024 threads)");
}

/* bf16 round to nearest even, written apart from the header's bit trick:
 * the nearer of the two bf16 neighbours, the even one on a tie. */
static double bf16_value(uint32_t bits16) {
    uint32_t u = bits16 << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static uint16_t ref_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if (isnan(f)) return 0x7fff;
    uint32_t sign = x & 0x80000000u, mag = x & 0x7fffffffu, lo = mag >> 16;
    if (isinf(f)) return (uint16_t)(x >> 16);
    double v = fabs((double)f), below = bf16_value(lo);
    /* Above the largest finite bf16, the next "value" is 2^128 (overflow). */
    double above = lo + 1 == 0x7f80 ? ldexp(1.0, 128) : bf16_value(lo + 1);
    uint32_t r = v - below < above - v ? lo : v - below > above - v ? lo + 1 : (lo & 1 ? lo + 1 : lo);
    return (uint16_t)((sign >> 16) | r);
}

static uint64_t rng_next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void test_bf16(void) {
    enum { RANDOM = 60000 };
    const uint32_t specials[] = {
        0x00000000, 0x80000000, 0x3f800000, 0x3f808000, /* 1 + 2^-8: a tie, to even (down) */
        0x3f818000,                                     /* a tie, to even (up) */
        0x3f808001, 0x3f807fff, 0x7f7fffff,             /* largest float: to inf */
        0x7f7f8000,                                     /* a tie at the top: to even = inf */
        0x7f7f7fff, 0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001, /* signalling NaN */
        0xffc00001, 0x00000001,                                     /* smallest subnormal: to 0 */
        0x00008000,                                                 /* subnormal tie: to 0 */
        0x00018000,                                                 /* subnormal tie: to 2 */
        0x007fffff,                                                 /* to the smallest normal */
        0x80008001, 0x00800000, 0x3effffff,
    };
    int n_special = (int)(sizeof specials / sizeof specials[0]), n = n_special + 3 * RANDOM;
    float *in = malloc(sizeof(float) * n), *back = malloc(sizeof(float) * n), *low = malloc(sizeof(float) * n),
          *high = malloc(sizeof(float) * n);
    unsigned short *bits = malloc(sizeof(unsigned short) * n), *ctor = malloc(sizeof(unsigned short) * n);
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < n; i++) {
        uint32_t u = i < n_special ? specials[i] : (uint32_t)rng_next(&s);
        if (i >= n_special && (i - n_special) % 3 == 1) u = (u & 0xffff0000u) | 0x8000u; /* exact ties */
        if (i >= n_special && (i - n_special) % 3 == 2) u &= 0x800fffffu;                /* subnormal or tiny */
        memcpy(&in[i], &u, sizeof u);
    }
    void *args[] = {&in, &n, &bits, &ctor, &back, &low, &high};
    int ok = run("emu_bf16", 5, 1, 1, 128, 1, 1, args), bad = 0;
    for (int i = 0; i < n; i++) {
        uint16_t want = ref_bf16(in[i]);
        float want_f = (float)bf16_value(want), want_neg = (float)bf16_value(ref_bf16(-in[i]));
        int good = bits[i] == want && ctor[i] == 0 && memcmp(&back[i], &want_f, 4) == 0 &&
                   memcmp(&low[i], &want_f, 4) == 0 && memcmp(&high[i], &want_neg, 4) == 0;
        if (!good) {
            if (bad < 5) {
                uint32_t u;
                memcpy(&u, &in[i], 4);
                printf("     bf16 of 0x%08x: 0x%04x, want 0x%04x\n", u, bits[i], want);
            }
            bad++;
        }
    }
    char what[160];
    snprintf(what, sizeof what, "bf16 conversions: %d inputs (%d special: ties, NaN, inf, subnormals), %d wrong", n,
             n_special, bad);
    check(ok && bad == 0, what);
    free(in), free(back), free(low), free(high), free(bits), free(ctor);
}

/* bf16 arithmetic on random bf16 values of exponents -6..2: their float sum,
 * difference and product are exact, so rounding those is the reference. */
static float random_bf16(uint64_t *s) {
    uint64_t r = rng_next(s);
    uint32_t u = (uint32_t)(r & 0x807f0000u) | (uint32_t)(127 - 6 + (int)((r >> 40) % 9)) << 23;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void test_bf16_ops(void) {
    enum { N = 20000 };
    static float a[N], b[N];
    static unsigned short out[5 * N];
    uint64_t s = 12345;
    for (int i = 0; i < N; i++) a[i] = random_bf16(&s), b[i] = random_bf16(&s);
    int n = N, bad = 0;
    float *ap = a, *bp = b;
    unsigned short *op = out;
    void *args[] = {&ap, &bp, &n, &op};
    int ok = run("emu_bf16_ops", 4, 1, 1, 256, 1, 1, args);
    for (int i = 0; i < N; i++) {
        uint16_t want[5] = {ref_bf16(a[i] + b[i]), ref_bf16(a[i] * b[i]), ref_bf16(a[i] - b[i]), ref_bf16(-a[i]),
                            a[i] < b[i]};
        if (memcmp(&out[5 * i], want, sizeof want)) {
            if (bad < 5) printf("     bf16 ops on %g, %g: wrong\n", a[i], b[i]);
            bad++;
        }
    }
    char what[160];
    snprintf(what, sizeof what, "bf16 arithmetic: + * - unary- < on %d pairs, %d wrong", N, bad);
    check(ok && bad == 0, what);
}

static void test_math(void) {
    float x[2] = {4.0f, 3.0f}, out[12], *xp = x, *op = out;
    void *args[] = {&xp, &op};
    int ok = run("emu_math", 1, 1, 1, 32, 1, 1, args);
    const float want[12] = {0.5f,
                            1.0f,
                            1.5f,
                            8.0f,
                            (float)(3 + (1ll << 40)),
                            4.5f,
                            7.0f + 4294967295.0f,
                            3.0f,
                            8.0f,
                            40.0f,
                            3.0f + 2147483647.0f,
                            1.0f};
    int bad = 0;
    for (int i = 0; i < 12; i++)
        if (out[i] != want[i]) {
            printf("     math %d: %g, want %g\n", i, out[i], want[i]);
            bad++;
        }
    check(ok && bad == 0, "math helpers, min/max overloads, __constant__: 12 results");
}

/* Two host threads launch at once, each with its own rows: neither sees the
 * other's fibers or shared memory. */
typedef struct {
    int seed, wrong, failed;
} host_thread;

static void *launch_many(void *p) {
    host_thread *h = p;
    enum { ROWS = 4, N = 777 };
    static _Thread_local float x[ROWS * N], out[ROWS];
    for (int rep = 0; rep < 30; rep++) {
        double want[ROWS] = {0};
        for (int i = 0; i < ROWS * N; i++) {
            x[i] = (float)((i * (h->seed + rep)) % 11 - 5);
            want[i / N] += x[i];
        }
        int rows = ROWS, n = N, down = rep % 2;
        const float *xp = x;
        float *op = out;
        void *args[] = {&xp, &rows, &n, &down, &op};
        const unsigned grid[3] = {3, 1, 1}, block[3] = {h->seed == 1 ? 256u : 1024u, 1, 1};
        char err[256];
        if (launch("emu_row_sums", grid, block, args, err, sizeof err)) h->failed++;
        for (int r = 0; r < ROWS; r++) h->wrong += out[r] != (float)want[r];
    }
    return NULL;
}

static void test_host_threads(void) {
    host_thread h[2] = {{1, 0, 0}, {2, 0, 0}};
    pthread_t t[2];
    int started = 0;
    for (int i = 0; i < 2; i++) started += pthread_create(&t[i], NULL, launch_many, &h[i]) == 0;
    for (int i = 0; i < started; i++) pthread_join(t[i], NULL);
    char what[160];
    snprintf(what, sizeof what, "two host threads launching at once: 60 launches, %d failed, %d wrong sums",
             h[0].failed + h[1].failed, h[0].wrong + h[1].wrong);
    check(started == 2 && !h[0].failed && !h[1].failed && !h[0].wrong && !h[1].wrong, what);
}

/* Launches per second of one 256-thread block with 8 barriers (printed,
 * not asserted: the machine's load decides it). */
static void print_timing(void) {
    float out[256], *op = out;
    void *args[] = {&op};
    int launches = 0, ok = 1;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    double elapsed = 0;
    while (elapsed < 0.3 && ok) {
        for (int i = 0; i < 50 && ok; i++, launches++) ok = run("emu_barriers", 1, 1, 1, 256, 1, 1, args);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        elapsed = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    }
    for (int t = 0; t < 256; t++) ok &= out[t] == (float)((t + 8) % 256);
    check(ok, "8 barriers over a ring of 256 threads");
    printf("timing: %.0f launches/s of a 256-thread block with 8 __syncthreads (%.1f us each)\n", launches / elapsed,
           1e6 * elapsed / launches);
}

/* Compiles the kernels with `cxx` and `flags` into `so` (or only checks them
 * when so is NULL); the warnings are errors. */
static int compile(const char *cxx, const char *flags, const char *dir, const char *so) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "'%s' -std=c++17 -O1 -Wall -Wextra -Werror %s -I'%s' -include cuda_emu.h -x c++ '%s/kernels.cpp' %s%s%s",
             cxx, flags, TLM_EMU_HEADER_DIR, dir, so ? "-fPIC -shared -o '" : "-fsyntax-only", so ? so : "",
             so ? "'" : "");
    int rc = system(cmd);
    if (rc != 0) printf("FAIL: %s\n", cmd);
    return rc == 0;
}

int main(void) {
    if (!*TLM_EMU_TEST_CXX) {
        printf("FAIL: no C++ compiler found when configuring; the emulated device needs one\n");
        return 1;
    }
    const char *tmp = getenv("TMPDIR");
    char dir[512], path[600], so[600], so_uc[600];
    snprintf(dir, sizeof dir, "%s/tlm-emu-test-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        printf("FAIL: cannot make a temporary folder %s\n", dir);
        return 1;
    }
    snprintf(path, sizeof path, "%s/kernels.cpp", dir);
    snprintf(so, sizeof so, "%s/kernels.so", dir);
    snprintf(so_uc, sizeof so_uc, "%s/kernels_ucontext.so", dir);
    FILE *f = fopen(path, "w");
    if (!f) {
        printf("FAIL: cannot write %s\n", path);
        return 1;
    }
    fprintf(f, "#include \"%s\"\n", TLM_EMU_KERNELS);
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++) fprintf(f, "TLM_EMU_EXPORT(%s)\n", kernels[i]);
    fclose(f);
    int compiled = compile(TLM_EMU_TEST_CXX, "", dir, so);
    /* The portable fibers (swapcontext), for machines without the assembly. */
    int compiled_uc = compile(TLM_EMU_TEST_CXX, "-DTLM_EMU_UCONTEXT", dir, so_uc);
    check(compiled_uc, "compiled with -DTLM_EMU_UCONTEXT");
    check(compiled, "compiled with " TLM_EMU_TEST_CXX " -Wall -Wextra -Werror");
    if (*TLM_EMU_TEST_CLANGXX)
        check(compile(TLM_EMU_TEST_CLANGXX, "", dir, NULL),
              "compiled with " TLM_EMU_TEST_CLANGXX " -Wall -Wextra -Werror");
    else printf("note: no clang++ found when configuring; compiled with one compiler only\n");
    void *lib_uc = compiled_uc ? dlopen(so_uc, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (compiled) {
        lib = dlopen(so, RTLD_NOW | RTLD_LOCAL);
        check(lib != NULL, "the module loads");
        if (!lib) printf("     %s\n", dlerror());
    }
    unlink(so);
    unlink(so_uc);
    unlink(path);
    rmdir(dir);
    if (!lib) return 1;
    test_row_sums();
    test_shuffles();
    test_indices();
    test_block_order();
    test_missing_barrier();
    test_uninit_shared();
    test_dynamic_shared();
    test_warp_ahead();
    test_early_exit();
    test_barrier_votes();
    test_errors();
    test_after_errors();
    test_bf16();
    test_bf16_ops();
    test_math();
    test_host_threads();
    print_timing();
    dlclose(lib);
    /* The swapcontext fibers on the cases that switch most, and the errors
     * that abandon fibers (they are slow: a system call per switch). */
    printf("with -DTLM_EMU_UCONTEXT:\n");
    lib = lib_uc;
    check(lib != NULL, "the ucontext module loads");
    if (lib) {
        test_shuffles();
        test_early_exit();
        test_errors();
        test_after_errors();
        dlclose(lib);
    }
    printf("%s: %d failed\n", failures ? "FAIL" : "PASS", failures);
    return failures != 0;
}
