/* Where a training step's time goes, per op kind (`tlm-run train
 * --profile`): both executors add each op's time here when m->profile is
 * set. The device executor waits for each op to finish before reading the
 * clock, so an op's time is its own rather than its launch's; that wait
 * costs throughput, so a profiled run's tokens/s is not the unprofiled
 * one's. The time outside the ops (the optimizer, the gradient norm, the
 * batch, host-device copies) is the steps' wall time less the ops'.
 *
 * GFLOP/s is shown for the ops shaped like GEMMs: the linear maps (2 m n k
 * each, the backward's two products 2×), the MLP (its two or three
 * products; its backward 2× that, the recomputed h not counted) and
 * attention (QK^T and PV over the causal half: 2·2·B·H·hd·T(T+1)/2
 * forward, 2× backward); and Titans' memory, flops.c's 24·H·hd² a token
 * split as attention's is (8·N·H·hd² forward, 16 backward).
 *
 * On the CPU each op's time also has its busy share: the CPU time of the
 * OpenMP threads (OpenBLAS's GEMMs run on them too, in its OpenMP build)
 * during the op over the threads x the op's wall time. Each thread's own
 * clock is read: the process's clock adds up the other threads' time only
 * at scheduler ticks, so ops shorter than a tick were credited with their
 * neighbours' work. Where libgomp has replaced a thread since the last mark
 * (it ends the threads past a smaller team's size), that interval takes
 * the process's clock and the threads are noted again. The rest of
 * threads x wall is the threads' idle or waiting time: a serial stretch, a
 * thread done before the others, one not scheduled. OpenMP's waiting
 * threads spin a while by default and then count as busy; with
 * OMP_WAIT_POLICY=passive they sleep and count as idle, and the table says
 * which.
 *
 * Under several ranks the table ends with the step split three ways:
 * compute (the ops and the rest of the step on this rank), communication
 * (sending and broadcasting gradient buckets) and wait (blocked until
 * another rank's partial sum, losses or stop decision arrives).
 *
 * With --profile-kernels, on a device, the table ends with each kernel's
 * and GEMM's own time and GFLOP/s, aggregated per op (kernel_times.h). */
#ifndef TLM_PROFILE_H
#define TLM_PROFILE_H

#include <stdio.h>
#include <time.h>

#include "kernel_times.h"
#include "model.h"
#include "tlm_ops.h"

/* The threads whose CPU time is read; more are counted in the capacity
 * (threads x wall) but not read, so their busy shares would read low. */
enum { TLM_PROFILE_MAX_CLOCKS = 1024 };

typedef struct tlm_profile {
    double seconds[TLM_OP_COUNT];
    double flops[TLM_OP_COUNT];
    long long calls[TLM_OP_COUNT];
    double step_seconds;      /* the profiled steps' wall time */
    long long steps;
    /* The CPU executor's threads (0 on a device: no busy shares), their
     * CPU clocks (tlm_profile_watch_threads), and their CPU seconds in each
     * op kind and in the profiled steps. */
    int threads, nclocks;
    clockid_t clocks[TLM_PROFILE_MAX_CLOCKS];
    unsigned clocks_noted; /* how many times the clocks were noted */
    double cpu_seconds[TLM_OP_COUNT];
    double step_cpu_seconds;
    /* Data-parallel runs (runtime/dist): of the steps' time outside the
     * ops, the seconds spent moving gradients between ranks and waiting on
     * other ranks; ranks 0 for a single process. */
    int ranks;
    double comm_seconds, wait_seconds;
    double *per_rank;         /* NULL, or [ranks][3]: each rank's step, communication and wait seconds */
    /* This rank's gradient buckets added and passed on, and how many of
     * them during the last micro-batch's backward (while some of its
     * gradients were not yet final). */
    long buckets, early_buckets;
    /* --profile-kernels: each kernel's and GEMM's time (kernel_times.h),
     * which the device adds during each profiled step (the trainer attaches
     * it: tlm_device_time_kernels) and the device executor labels with the
     * op running; NULL otherwise. */
    tlm_kernel_times *kernels;
} tlm_profile;

/* A zeroed profile, with a device table when device_kernels; NULL when
 * out of memory. */
tlm_profile *tlm_profile_create(bool device_kernels);
void tlm_profile_destroy(tlm_profile *p);

/* Seconds on a monotonic clock. */
double tlm_profile_clock(void);
/* Busy shares for a CPU run on `threads` OpenMP threads: runs a parallel
 * region of that many, each thread noting its CPU clock. */
void tlm_profile_watch_threads(tlm_profile *p, int threads);
/* A moment: wall time, the watched threads' CPU time summed (cpu) and
 * which noting of their clocks it read (clocks: 0 when it could not read
 * them all), and the process's CPU time, which two marks of different
 * notings are compared by. */
typedef struct tlm_profile_mark {
    double wall, cpu, process;
    unsigned clocks;
} tlm_profile_mark;
tlm_profile_mark tlm_profile_now(tlm_profile *p);
/* Adds op's time since t0 (and its FLOPs at m's last sizes). */
void tlm_profile_op(tlm_profile *p, const tlm_model *m, const tlm_abi_op *op, tlm_profile_mark t0);
/* Adds `steps` profiled steps that began at t0. */
void tlm_profile_steps(tlm_profile *p, long long steps, tlm_profile_mark t0);
/* The FLOPs of op at m's last sizes (0 for the ops not shaped like GEMMs). */
double tlm_profile_op_flops(const tlm_model *m, const tlm_abi_op *op);

/* The table: op kinds by time, ms per step, share, GFLOP/s, and the rest. */
void tlm_profile_print(const tlm_profile *p, FILE *out);
/* The same as one JSON object ({"steps": …, "ops": […]}), no newline;
 * false when the write fails. */
bool tlm_profile_write_json(const tlm_profile *p, FILE *out);

#endif
