/* Room in the address space for OpenBLAS's buffers, checked before OpenBLAS
 * reserves them.
 *
 * OpenBLAS (0.3.21, Debian's OpenMP build that the runtime links) maps its
 * work buffers as 128 MiB each: one per thread when the library is loaded
 * (OMP_NUM_THREADS, else every CPU), one more per thread when the count is
 * raised past that, and one in a shared pool for the first GEMM (threads
 * that call GEMMs at once, as Titans' ops do, run OpenBLAS on one thread,
 * which leaves the other threads' buffers in the pool for them). When a
 * mapping fails, blas_memory_alloc tries again forever: under an
 * address-space limit (`ulimit -v`, `ulimit -d`, or strict overcommit) the
 * process hangs instead of failing. So each place where it may map one is
 * checked first, and the pool's buffer is mapped while the runtime can
 * still say what is short. Without such a limit nothing here maps
 * anything. */
#ifndef TLM_RT_BLAS_ROOM_H
#define TLM_RT_BLAS_ROOM_H

#include <stdbool.h>
#include <stdint.h>

#include "tlm_rt/error.h"

/* OpenBLAS's BUFFER_SIZE on x86-64 (32 << 22). */
#define TLM_BLAS_BUFFER_BYTES ((int64_t)128 << 20)

/* The limit that can make a mapping fail, named as a user sets it
 * ("ulimit -v", "ulimit -d", "vm.overcommit_memory=2"), or NULL when there
 * is none. envp-free and malloc-free: it runs before any constructor. */
const char *tlm_address_limit(void);
/* Whether `bytes` more could be mapped now (one mapping, made and undone). */
bool tlm_address_room(int64_t bytes);
/* How many buffers OpenBLAS maps when it is loaded, from the environment
 * given (OMP_NUM_THREADS's first value, at most the CPUs; else the CPUs). */
int tlm_blas_startup_buffers(char **envp);

/* Sets both thread pools to n threads (tlm_set_num_threads) for a command
 * that will run GEMMs, after checking that OpenBLAS's buffers for n threads
 * and its pool's fit under the limit, if there is one, and mapping them
 * now, with OpenMP's threads: the memory budgets read afterwards see them.
 * False, with a one-line reason, when they do not fit. */
bool tlm_threads_start(int n, tlm_err *err);

#endif
