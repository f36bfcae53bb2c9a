/* The CPU's multiply-add peak, measured: the denominator of MFU on the CPU
 * (tlm-run bench) and the ceiling bench/mlp_bench sets the MLP kernels and
 * OpenBLAS's GEMMs against. No table: CPUs of one name run at different
 * clocks (a VM's share, turbo with one core busy or all), so the figure is
 * what this machine does now. */
#ifndef TLM_CPU_PEAK_H
#define TLM_CPU_PEAK_H

#include <time.h>

/* Floats per vector of the widest multiply-add this CPU has and this
 * build can run: 16 (AVX-512F), 8 (AVX2 + FMA), or 0 (none: no figure). */
int tlm_cpu_fma_lanes(void);

/* GFLOP/s of `threads` threads (OpenMP) each running only fused
 * multiply-adds on vectors of `lanes` floats, each timed with `clock`
 * (CLOCK_THREAD_CPUTIME_ID leaves out time the thread did not run), the
 * best of `reps` runs per thread, summed; 0 when the CPU or build cannot
 * run that width. About 10 ms a run at the peak. */
double tlm_cpu_fma_peak_gflops(int lanes, int threads, clockid_t clock, int reps);

#endif
