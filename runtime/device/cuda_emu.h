// Runs the emitted CUDA source on the CPU, for testing without a GPU: every
// block's 256 threads are real threads (one block at a time), __syncthreads
// is a barrier, and __shared__ variables are statics that the block's
// threads share. Races and missing barriers in the kernels show up as
// wrong results here as they would on a GPU (less reliably).
#include <cmath>
#include <cstdlib>
#include <pthread.h>

struct dim3 {
    unsigned x, y, z;
};
static thread_local dim3 threadIdx;
static dim3 blockIdx, blockDim, gridDim;
static pthread_barrier_t emu_barrier;

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __shared__ static

static inline void __syncthreads() { pthread_barrier_wait(&emu_barrier); }

template <class F> struct EmuThread {
    F *kernel;
    unsigned index;
    static void *run(void *p) {
        EmuThread *t = static_cast<EmuThread *>(p);
        threadIdx = dim3{t->index, 0, 0};
        (*t->kernel)();
        return nullptr;
    }
};

template <class F> static void emu_launch(unsigned grid, F kernel) {
    enum { THREADS = 256 };
    gridDim = dim3{grid, 1, 1};
    blockDim = dim3{THREADS, 1, 1};
    pthread_barrier_init(&emu_barrier, nullptr, THREADS);
    for (unsigned b = 0; b < grid; b++) {
        blockIdx = dim3{b, 0, 0};
        pthread_t threads[THREADS];
        EmuThread<F> args[THREADS];
        for (unsigned t = 0; t < THREADS; t++) {
            args[t] = EmuThread<F>{&kernel, t};
            if (pthread_create(&threads[t], nullptr, &EmuThread<F>::run, &args[t]) != 0) abort();
        }
        for (unsigned t = 0; t < THREADS; t++) pthread_join(threads[t], nullptr);
    }
    pthread_barrier_destroy(&emu_barrier);
}
