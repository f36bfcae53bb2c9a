/* The core's multiply-add peak, the ceiling the MLP kernels and OpenBLAS's
 * GEMMs are measured against (bench/mlp_bench). */
#ifndef TLM_BENCH_FMA_PEAK_H
#define TLM_BENCH_FMA_PEAK_H

#include <time.h>

/* GFLOP/s of one thread running only fused multiply-adds on vectors of
 * `lanes` floats (8: AVX2 + FMA, 16: AVX-512F), timed with `clock`, best
 * of `reps`; 0 when this build or CPU cannot run that width. */
double fma_peak_gflops(int lanes, clockid_t clock, int reps);

#endif
