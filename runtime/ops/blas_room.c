/* See blas_room.h: OpenBLAS's buffers checked for room before OpenBLAS
 * maps them, since it retries a failed mapping forever. */
#include "tlm_rt/blas_room.h"

#include <cblas.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "tlm_rt/ops.h"

/* OpenBLAS's pool, exported by libopenblas though not in cblas.h: a buffer
 * taken and given back stays mapped, for the next GEMM to reuse. */
void *blas_memory_alloc(int procpos);
void blas_memory_free(void *buffer);

/* OpenBLAS's MAX_THREADS in Debian's build (openblas_get_config()). */
enum { BLAS_MAX_THREADS = 64 };

static bool limited(int resource) {
    struct rlimit r;
    return getrlimit(resource, &r) == 0 && r.rlim_cur != RLIM_INFINITY;
}

/* Strict overcommit refuses a mapping past the commit limit, with no
 * rlimit set. */
static bool overcommit_strict(void) {
    int fd = open("/proc/sys/vm/overcommit_memory", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    char c = 0;
    ssize_t got = read(fd, &c, 1);
    close(fd);
    return got == 1 && c == '2';
}

const char *tlm_address_limit(void) {
    if (limited(RLIMIT_AS)) return "ulimit -v";
    /* since Linux 4.7 a private writable mapping counts as data */
    if (limited(RLIMIT_DATA)) return "ulimit -d";
    if (overcommit_strict()) return "vm.overcommit_memory=2";
    return NULL;
}

bool tlm_address_room(int64_t bytes) {
    if (bytes <= 0) return true;
    if ((uint64_t)bytes > SIZE_MAX / 2) return false;
    /* as OpenBLAS maps a buffer (readable, writable, private), so the same
     * limits count it; never touched, and undone at once */
    void *p = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return false;
    munmap(p, (size_t)bytes);
    return true;
}

/* A positive decimal count at s (up to a comma: OMP_NUM_THREADS may list a
 * count per nesting level), else 0. */
static int leading_count(const char *s) {
    int n = 0;
    for (; *s >= '0' && *s <= '9'; s++) {
        if (n > 100000) return 0;
        n = n * 10 + (*s - '0');
    }
    return *s == '\0' || *s == ',' ? n : 0;
}

int tlm_blas_startup_buffers(char **envp) {
    long cpus = sysconf(_SC_NPROCESSORS_CONF);
    int n = cpus > 0 ? (int)(cpus < BLAS_MAX_THREADS ? cpus : BLAS_MAX_THREADS) : 1;
    static const char key[] = "OMP_NUM_THREADS=";
    for (char **e = envp; e && *e; e++)
        if (strncmp(*e, key, sizeof key - 1) == 0) {
            int want = leading_count(*e + sizeof key - 1);
            if (want > 0 && want < n) n = want;
        }
    return n;
}

/* OpenBLAS's thread count has been at most this since it was loaded: its
 * threads' buffers exist up to it (0: not yet read). */
static int blas_threads_mapped;
/* Whether the pool holds the one buffer it needs (taken here before). */
static bool pool_filled;

bool tlm_threads_start(int n, tlm_err *err) {
    const char *limit = tlm_address_limit();
    if (!limit || n <= 0) {
        tlm_set_num_threads(n);
        return true;
    }
    if (blas_threads_mapped == 0) blas_threads_mapped = openblas_get_num_threads();
    int blas_n = n < BLAS_MAX_THREADS ? n : BLAS_MAX_THREADS;
    int new_thread_buffers = blas_n > blas_threads_mapped ? blas_n - blas_threads_mapped : 0;
    /* the pool: the buffer of a GEMM called from one thread. Titans' ops
     * call them from every thread at once, but under tlm_blas_single_begin,
     * whose openblas_set_num_threads(1) hands the other threads' buffers to
     * the pool (measured: no new mapping for 2 or 6 such callers) */
    int pool = pool_filled ? 0 : 1;
    int64_t needed = (int64_t)(new_thread_buffers + pool) * TLM_BLAS_BUFFER_BYTES;
    if (!tlm_address_room(needed))
        return tlm_fail(err,
                        "the address-space limit (%s) leaves no room for OpenBLAS's buffers for %d thread%s "
                        "(128 MiB each, %lld MiB more): raise the limit, or lower --threads",
                        limit, blas_n, blas_n == 1 ? "" : "s", (long long)(needed >> 20));
    tlm_set_num_threads(n);
    if (blas_n > blas_threads_mapped) blas_threads_mapped = blas_n;
    /* taken only after the room for it was checked: taking one maps it
     * unless the pool has a free one; given back, it stays mapped */
    if (pool) blas_memory_free(blas_memory_alloc(0));
    pool_filled = true;
#ifdef _OPENMP
    /* OpenMP's threads and their stacks, now rather than mid-step: a
     * memory budget read later counts them */
#pragma omp parallel
    { (void)0; }
#endif
    return true;
}
