/* One knob for both thread pools the ops use: OpenMP for the loops in this
 * library, OpenBLAS's own for the GEMMs. */
#include "tlm_rt/ops.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#ifdef _OPENMP
#include <omp.h>
#endif

void tlm_set_num_threads(int n) {
    if (n <= 0) return;
#ifdef _OPENMP
    omp_set_num_threads(n);
#endif
    openblas_set_num_threads(n);
}

int tlm_blas_single_begin(void) {
    int n = openblas_get_num_threads();
    if (n != 1) {
        int omp = tlm_get_num_threads();
        openblas_set_num_threads(1);
#ifdef _OPENMP
        /* OpenBLAS's OpenMP build sets OpenMP's count with its own: a loop
         * of the ops in between keeps its threads (Titans' forward ran on
         * one). OpenBLAS stays on one: it follows OpenMP's count only from
         * a count above one. */
        omp_set_num_threads(omp);
#else
        (void)omp;
#endif
    }
    return n;
}

void tlm_blas_single_end(int saved) {
    if (saved != 1) openblas_set_num_threads(saved);
}

tlm_thread_counts tlm_threads_single_begin(void) {
    tlm_thread_counts saved = {tlm_get_num_threads(), tlm_blas_single_begin()};
#ifdef _OPENMP
    if (saved.omp != 1) omp_set_num_threads(1);
#endif
    return saved;
}

void tlm_threads_single_end(tlm_thread_counts saved) {
#ifdef _OPENMP
    if (saved.omp != 1) omp_set_num_threads(saved.omp);
#endif
    tlm_blas_single_end(saved.blas);
}

int tlm_get_num_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

bool tlm_threads_can_split(void) {
#ifdef _OPENMP
    return omp_get_max_threads() > 1 && !omp_in_parallel();
#else
    return false;
#endif
}

int tlm_thread_index(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* Each OpenMP runtime reads its own variable besides OMP_WAIT_POLICY:
 * libgomp GOMP_SPINCOUNT, LLVM's libomp (whose omp.h defines
 * KMP_VERSION_MAJOR) KMP_BLOCKTIME; the other's is ignored. */
bool tlm_threads_wait_passively(void) {
#ifdef _OPENMP
    const char *policy = getenv("OMP_WAIT_POLICY");
#ifdef KMP_VERSION_MAJOR
    const char *zero_wait = getenv("KMP_BLOCKTIME");
#else
    const char *zero_wait = getenv("GOMP_SPINCOUNT");
#endif
    return (policy && !strcasecmp(policy, "passive")) || (zero_wait && !strcmp(zero_wait, "0"));
#else
    return true; /* no pool: nothing waits */
#endif
}
