/* Before OpenBLAS is loaded: room for the buffers it maps then.
 *
 * OpenBLAS's constructor maps a 128 MiB buffer per thread and retries a
 * failed mapping forever (blas_room.h), so under a tight `ulimit -v` the
 * process hung before main. A function in the executable's .preinit_array
 * runs before any shared library's constructor: it checks the room and
 * fails with one line (exit 1) where OpenBLAS would hang. libc is ready;
 * no other library's constructor has run, and the environment is the
 * envp handed in. */
#include <stdio.h>
#include <unistd.h>

#include "tlm_rt/blas_room.h"

#define START_SLACK ((int64_t)16 << 20)

static void check_room_for_openblas(int argc, char **argv, char **envp) {
    (void)argc, (void)argv;
    const char *limit = tlm_address_limit();
    if (!limit) return;
    int buffers = tlm_blas_startup_buffers(envp);
    /* with room to spare for what the constructors allocate besides */
    if (tlm_address_room(buffers * TLM_BLAS_BUFFER_BYTES + START_SLACK)) return;
    char line[400];
    int n = snprintf(line, sizeof line,
                     "tlm-run: the address-space limit (%s) leaves no room for the %lld MiB OpenBLAS maps when "
                     "it starts (128 MiB for each of %d thread%s: OMP_NUM_THREADS, else the CPUs); raise the "
                     "limit, or set OMP_NUM_THREADS=1\n",
                     limit, (long long)(buffers * TLM_BLAS_BUFFER_BYTES >> 20), buffers, buffers == 1 ? "" : "s");
    if (n > 0 && write(STDERR_FILENO, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1) < 0) _exit(1);
    _exit(1);
}

__attribute__((used, section(".preinit_array"))) static void (*const preinit_room)(int, char **,
                                                                                   char **) = check_room_for_openblas;
