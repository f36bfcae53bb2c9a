/* The device API's one front (device.h): picks the backend, checks what is
 * the same for both (names, address ranges, launch shapes, GEMM
 * descriptions), keeps the allocation table behind
 * tlm_device_memory_in_use, and runs the module cache (kernel_cache.h)
 * around the backend's compiler. The backends (device_impl.h) only see
 * arguments that passed these checks. */
#include "device.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "device_impl.h"
#include "gpu_peaks.h"
#include "kernel_cache.h"

/* ---- the device and its allocation table ---- */

typedef struct allocation {
    tlm_dptr addr;
    size_t bytes; /* as asked for */
} allocation;

/* What device.c keeps beside the backend's view of the device. */
typedef struct device_core {
    tlm_device dev; /* first: a tlm_device * is a device_core * */
    allocation *allocs; /* sorted by address, so a range check is a binary search */
    size_t nallocs, cap;
    tlm_module *modules; /* loaded, unloaded at close if still there */
    char cache_warning[1200]; /* the last "kernel cache unusable" line printed */
} device_core;

static device_core *core_of(const tlm_device *d) { return (device_core *)d; }

struct tlm_kernel {
    void *fn;               /* the backend's handle */
    unsigned static_shared; /* its static shared memory (0 where the backend cannot tell) */
    unsigned shared_optin;  /* the dynamic shared memory it may have: 48 KiB less static_shared until raised */
    char name[];
};

struct tlm_module {
    void *handle;     /* the backend's */
    uint64_t bytes;   /* the binary's size, counted as memory in use */
    char *what;
    tlm_kernel **slots; /* open addressing by name; NULL is empty */
    size_t nslots, nkernels;
    tlm_module *next;
};

/* "cuda" is device 0, "cuda:N" device N; anything else is not a device. */
static bool parse_device_name(const char *name, int *ordinal, tlm_err *err) {
    static const char usage[] = "expected cuda or cuda:N, N a device number";
    if (!name) return tlm_fail(err, "no device named (%s)", usage);
    if (strcmp(name, "cuda") == 0) {
        *ordinal = 0;
        return true;
    }
    if (strncmp(name, "cuda:", 5) != 0) return tlm_fail(err, "unknown device \"%s\" (%s)", name, usage);
    const char *p = name + 5;
    if (*p == '\0') return tlm_fail(err, "device \"%s\" lacks its number after the colon (%s)", name, usage);
    long long n = 0;
    for (; *p; p++) {
        if (*p < '0' || *p > '9')
            return tlm_fail(err, "device \"%s\": \"%s\" is not a device number (%s)", name, name + 5, usage);
        n = n * 10 + (*p - '0');
        if (n > INT_MAX) return tlm_fail(err, "device \"%s\": the device number is too large", name);
    }
    *ordinal = (int)n;
    return true;
}

/* TLM_TEST_DEVICE=emulated puts the emulated device behind "cuda". */
static const tlm_device_backend *pick_backend(tlm_err *err) {
    const char *test = getenv("TLM_TEST_DEVICE");
    if (!test || !*test) return &tlm_device_cuda;
    if (strcmp(test, "emulated") == 0) return &tlm_device_emulated;
    tlm_fail(err, "TLM_TEST_DEVICE=%s: the only value this test switch takes is \"emulated\"", test);
    return NULL;
}

tlm_device *tlm_device_open(const char *name, tlm_err *err) {
    int ordinal = 0;
    if (!parse_device_name(name, &ordinal, err)) return NULL;
    const tlm_device_backend *backend = pick_backend(err);
    if (!backend) return NULL;
    device_core *c = calloc(1, sizeof *c);
    if (!c) {
        tlm_fail(err, "out of memory opening %s", name);
        return NULL;
    }
    c->dev.backend = backend;
    c->dev.info.ordinal = ordinal;
    if (!backend->open(&c->dev, ordinal, err)) {
        free(c);
        return NULL;
    }
    c->dev.info.peak_bf16_tflops = c->dev.info.emulated ? 0 : tlm_gpu_peak_bf16_tflops(c->dev.info.name);
    return &c->dev;
}

void tlm_device_close(tlm_device *d) {
    if (!d) return;
    device_core *c = core_of(d);
    while (c->modules) tlm_device_module_unload(d, c->modules);
    for (size_t i = 0; i < c->nallocs; i++) d->backend->free(d, c->allocs[i].addr);
    free(c->allocs);
    d->backend->close(d);
    free(c);
}

const tlm_device_info *tlm_device_get_info(const tlm_device *d) { return &d->info; }

/* The index of the first allocation whose address is above p. */
static size_t upper_bound(const device_core *c, tlm_dptr p) {
    size_t lo = 0, hi = c->nallocs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->allocs[mid].addr <= p) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Whether [p, p + bytes) lies inside one allocation. */
static bool inside_allocation(const device_core *c, tlm_dptr p, uint64_t bytes) {
    size_t i = upper_bound(c, p);
    if (i == 0) return false;
    const allocation *a = &c->allocs[i - 1];
    uint64_t offset = p - a->addr;
    return offset <= a->bytes && bytes <= a->bytes - offset;
}

static bool check_range(const device_core *c, const char *op, const char *role, tlm_dptr p, size_t bytes,
                        tlm_err *err) {
    if (inside_allocation(c, p, bytes)) return true;
    return tlm_fail(err, "%s: the %s range of %zu bytes at 0x%" PRIx64 " is not inside one device allocation", op, role,
                    bytes, p);
}

tlm_dptr tlm_device_alloc(tlm_device *d, size_t bytes, tlm_err *err) {
    device_core *c = core_of(d);
    if (!tlm_device_outside_capture(d, "an allocation", err)) return 0;
    if (c->nallocs == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 64;
        allocation *grown = realloc(c->allocs, cap * sizeof *grown);
        if (!grown) {
            tlm_fail(err, "out of host memory for the device's allocation table");
            return 0;
        }
        c->allocs = grown;
        c->cap = cap;
    }
    /* A zero-byte allocation still gets an address of its own. */
    tlm_dptr p = d->backend->alloc(d, bytes ? bytes : 1, err);
    if (!p) return 0;
    size_t i = upper_bound(c, p);
    memmove(c->allocs + i + 1, c->allocs + i, (c->nallocs - i) * sizeof *c->allocs);
    c->allocs[i] = (allocation){p, bytes};
    c->nallocs++;
    d->bytes_in_use += bytes;
    return p;
}

/* Freeing 0 or an address the device did not hand out does nothing (the
 * backend never sees it, so it cannot be freed twice). */
void tlm_device_free(tlm_device *d, tlm_dptr p) {
    device_core *c = core_of(d);
    size_t i = upper_bound(c, p);
    if (p == 0 || i == 0 || c->allocs[i - 1].addr != p) return;
    /* refused in a capture (it would spoil it): freed at close instead */
    if (!tlm_device_outside_capture(d, "a free", NULL)) return;
    d->bytes_in_use -= c->allocs[i - 1].bytes;
    memmove(c->allocs + i - 1, c->allocs + i, (c->nallocs - i) * sizeof *c->allocs);
    c->nallocs--;
    d->backend->free(d, p);
}

bool tlm_device_upload(tlm_device *d, tlm_dptr dst, const void *src, size_t bytes, tlm_err *err) {
    if (bytes == 0) return true;
    if (!src) return tlm_fail(err, "upload: no host source");
    if (!tlm_device_outside_capture(d, "an upload from the host", err)) return false;
    if (!check_range(core_of(d), "upload", "destination", dst, bytes, err)) return false;
    return d->backend->upload(d, dst, src, bytes, err);
}

bool tlm_device_download(tlm_device *d, void *dst, tlm_dptr src, size_t bytes, tlm_err *err) {
    if (bytes == 0) return true;
    if (!dst) return tlm_fail(err, "download: no host destination");
    if (!tlm_device_outside_capture(d, "a download to the host", err)) return false;
    if (!check_range(core_of(d), "download", "source", src, bytes, err)) return false;
    return d->backend->download(d, dst, src, bytes, err);
}

bool tlm_device_copy(tlm_device *d, tlm_dptr dst, tlm_dptr src, size_t bytes, tlm_err *err) {
    if (bytes == 0 || dst == src) return true;
    device_core *c = core_of(d);
    if (!check_range(c, "copy", "source", src, bytes, err) || !check_range(c, "copy", "destination", dst, bytes, err))
        return false;
    if (dst < src + bytes && src < dst + bytes)
        return tlm_fail(err, "copy: the source and destination ranges of %zu bytes overlap", bytes);
    return d->backend->copy(d, dst, src, bytes, err);
}

bool tlm_device_zero(tlm_device *d, tlm_dptr dst, size_t bytes, tlm_err *err) {
    if (bytes == 0) return true;
    if (!check_range(core_of(d), "zero", "destination", dst, bytes, err)) return false;
    return d->backend->zero(d, dst, bytes, err);
}

bool tlm_device_sync(tlm_device *d, tlm_err *err) {
    return tlm_device_outside_capture(d, "a device sync", err) && d->backend->sync(d, err);
}

uint64_t tlm_device_memory_in_use(const tlm_device *d) { return d->bytes_in_use; }

uint64_t tlm_device_memory_free(tlm_device *d) {
    uint64_t bytes = 0;
    tlm_err err;
    if (d->backend->memory_free && d->backend->memory_free(d, &bytes, &err)) return bytes;
    return d->info.memory_total > d->bytes_in_use ? d->info.memory_total - d->bytes_in_use : 0;
}

/* ---- modules: the cache around the backend's compiler ---- */

static double seconds_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static bool compile_timed(tlm_device *d, const char *what, const char *source, uint8_t **bin, size_t *size,
                          tlm_module_report *r, tlm_err *err) {
    double t0 = seconds_now();
    bool ok = d->backend->compile(d, what, source, bin, size, err);
    r->compile_seconds = seconds_now() - t0;
    return ok;
}

/* The cache folder cannot be used: one warning line. A run loads several
 * modules (the runtime's, the tensor cores', the model's), each of which
 * finds the same folder unusable; the same line again says nothing new, so
 * it is printed once per device (docs/gpu.md, "The kernel cache"). */
static void warn_cache_unusable(tlm_device *d, const char *dir, const char *why) {
    device_core *c = core_of(d);
    char line[sizeof c->cache_warning];
    snprintf(line, sizeof line, "tlm: warning: kernel cache %s unusable (%s); compiling in memory\n", dir, why);
    if (!strcmp(line, c->cache_warning)) return;
    snprintf(c->cache_warning, sizeof c->cache_warning, "%s", line);
    fputs(line, stderr);
}

/* The binary for source: from the cache when it has a sound entry, else
 * compiled (and stored when the cache is usable). */
static bool module_binary(tlm_device *d, const char *what, const char *source, uint8_t **bin, size_t *size,
                          tlm_module_report *r, tlm_err *err) {
    uint8_t key[TLM_SHA256_SIZE];
    tlm_kernel_cache_key(source, d->backend->compile_options(d), d->backend->compiler_id(d), d->info.arch, key);
    char dir[sizeof r->cache_path];
    tlm_err why = {{0}};
    bool usable = tlm_kernel_cache_dir(dir, sizeof dir, &why);
    if (usable && !tlm_kernel_cache_path(dir, key, r->cache_path, sizeof r->cache_path)) {
        usable = tlm_fail(&why, "the path is too long");
        r->cache_path[0] = '\0';
    }
    if (!usable) {
        warn_cache_unusable(d, dir[0] ? dir : "folder", why.msg);
        return compile_timed(d, what, source, bin, size, r, err);
    }
    if (tlm_kernel_cache_get(r->cache_path, bin, size)) {
        r->cache_hit = true;
        return true;
    }
    if (!compile_timed(d, what, source, bin, size, r, err)) return false;
    if (tlm_kernel_cache_blocked(r->cache_path)) return true; /* the get's note said so; the folder itself works */
    if (tlm_kernel_cache_put(r->cache_path, *bin, *size, &why)) r->cache_written = true;
    else warn_cache_unusable(d, dir, why.msg);
    return true;
}

int tlm_device_module_cached(tlm_device *d, const char *source, char *path, size_t len, char *why, size_t whylen) {
    uint8_t key[TLM_SHA256_SIZE];
    tlm_kernel_cache_key(source, d->backend->compile_options(d), d->backend->compiler_id(d), d->info.arch, key);
    char dir[512];
    tlm_err unusable = {{0}};
    if (len) path[0] = '\0';
    if (!tlm_kernel_cache_dir(dir, sizeof dir, &unusable) || !tlm_kernel_cache_path(dir, key, path, len)) return 0;
    return tlm_kernel_cache_probe(path, why, whylen);
}

tlm_module *tlm_device_module_load(tlm_device *d, const char *what, const char *source, tlm_module_report *report,
                                   tlm_err *err) {
    tlm_module_report scratch;
    tlm_module_report *r = report ? report : &scratch;
    memset(r, 0, sizeof *r);
    if (!what) what = "a CUDA source";
    if (!source) {
        tlm_fail(err, "%s: no source", what);
        return NULL;
    }
    if (!tlm_device_outside_capture(d, "loading a module", err)) return NULL;
    tlm_module *m = calloc(1, sizeof *m);
    if (m) m->what = strdup(what);
    if (!m || !m->what) {
        free(m);
        tlm_fail(err, "out of memory loading %s", what);
        return NULL;
    }
    uint8_t *bin = NULL;
    size_t size = 0;
    bool ok = module_binary(d, what, source, &bin, &size, r, err);
    if (ok && !d->backend->load(d, what, bin, size, &m->handle, err)) {
        ok = false;
        if (r->cache_hit) {
            /* Sound bytes the backend still refuses (a driver update, say):
             * drop the entry and build afresh once. */
            fprintf(stderr, "tlm: note: kernel cache entry %s does not load (%s); compiling again\n", r->cache_path,
                    err ? err->msg : "");
            remove(r->cache_path);
            free(bin);
            bin = NULL;
            r->cache_hit = false;
            ok = module_binary(d, what, source, &bin, &size, r, err) &&
                 d->backend->load(d, what, bin, size, &m->handle, err);
        }
    }
    free(bin);
    if (!ok) {
        free(m->what);
        free(m);
        return NULL;
    }
    m->bytes = size;
    d->bytes_in_use += size;
    device_core *c = core_of(d);
    m->next = c->modules;
    c->modules = m;
    return m;
}

void tlm_device_module_unload(tlm_device *d, tlm_module *m) {
    if (!m) return;
    device_core *c = core_of(d);
    for (tlm_module **p = &c->modules; *p; p = &(*p)->next) {
        if (*p == m) {
            *p = m->next;
            break;
        }
    }
    d->backend->unload(d, m->handle);
    d->bytes_in_use -= m->bytes;
    for (size_t i = 0; i < m->nslots; i++) free(m->slots[i]);
    free(m->slots);
    free(m->what);
    free(m);
}

/* ---- kernels: looked up once per module, then found by name ---- */

static size_t name_hash(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return (size_t)h;
}

/* The slot holding name, or the empty slot where it belongs. */
static tlm_kernel **find_slot(tlm_module *m, const char *name) {
    size_t mask = m->nslots - 1;
    for (size_t i = name_hash(name) & mask;; i = (i + 1) & mask) {
        if (!m->slots[i] || strcmp(m->slots[i]->name, name) == 0) return &m->slots[i];
    }
}

/* Keeps the table at most half full (a power of two in size). */
static bool make_room(tlm_module *m) {
    if (2 * (m->nkernels + 1) <= m->nslots) return true;
    size_t n = m->nslots ? 2 * m->nslots : 32;
    tlm_module grown = {.slots = calloc(n, sizeof(tlm_kernel *)), .nslots = n};
    if (!grown.slots) return false;
    for (size_t i = 0; i < m->nslots; i++)
        if (m->slots[i]) *find_slot(&grown, m->slots[i]->name) = m->slots[i];
    free(m->slots);
    m->slots = grown.slots;
    m->nslots = n;
    return true;
}

tlm_kernel *tlm_device_kernel(tlm_device *d, tlm_module *m, const char *name, tlm_err *err) {
    if (!m || !name) {
        tlm_fail(err, "no module or no kernel name");
        return NULL;
    }
    if (m->nslots) {
        tlm_kernel *k = *find_slot(m, name);
        if (k) return k;
    }
    size_t len = strlen(name);
    tlm_kernel *k = malloc(sizeof *k + len + 1);
    if (!k || !make_room(m)) {
        free(k);
        tlm_fail(err, "out of memory looking up kernel %s", name);
        return NULL;
    }
    memcpy(k->name, name, len + 1);
    tlm_err why = {{0}};
    if (!d->backend->kernel(d, m->handle, name, &k->fn, &k->static_shared, &why)) {
        free(k);
        tlm_fail(err, "%s: %s", m->what, why.msg);
        return NULL;
    }
    k->shared_optin = k->static_shared < TLM_SHARED_DEFAULT ? TLM_SHARED_DEFAULT - k->static_shared : 0;
    *find_slot(m, name) = k;
    m->nkernels++;
    return k;
}

/* CUDA's limits on every device since compute capability 3.0. */
static bool check_dims(const char *name, tlm_launch dims, tlm_err *err) {
    const unsigned *g = dims.grid, *b = dims.block;
    if (!g[0] || !g[1] || !g[2] || !b[0] || !b[1] || !b[2])
        return tlm_fail(err, "kernel %s: launch with a zero dimension (grid %ux%ux%u, block %ux%ux%u)", name, g[0],
                        g[1], g[2], b[0], b[1], b[2]);
    uint64_t threads = (uint64_t)b[0] * b[1] * b[2];
    if (b[0] > 1024 || b[1] > 1024 || b[2] > 64 || threads > 1024)
        return tlm_fail(err, "kernel %s: a block of %ux%ux%u threads (at most 1024 in all, 1024x1024x64 by axis)", name,
                        b[0], b[1], b[2]);
    if (b[0] % 32 != 0)
        return tlm_fail(err, "kernel %s: blockDim.x = %u is not a multiple of 32 (a whole number of warps)", name,
                        b[0]);
    if (g[0] > 2147483647u || g[1] > 65535 || g[2] > 65535)
        return tlm_fail(err, "kernel %s: a grid of %ux%ux%u blocks (at most 2^31-1 x 65535 x 65535)", name, g[0], g[1],
                        g[2]);
    return true;
}

/* Lets k have `bytes` of dynamic shared memory (device.h: past 48 KiB with
 * its static shared memory a kernel opts in, outside a capture). */
static bool allow_shared(tlm_device *d, tlm_kernel *k, unsigned bytes, tlm_err *err) {
    if ((uint64_t)bytes + k->static_shared > d->info.shared_optin)
        return tlm_fail(err,
                        "kernel %s: %u bytes of dynamic shared memory and %u of static (%s gives a block at most %u)",
                        k->name, bytes, k->static_shared, d->info.name, d->info.shared_optin);
    if (bytes <= k->shared_optin) return true;
    char what[200];
    snprintf(what, sizeof what, "kernel %s's first launch with %u bytes of dynamic shared memory (past %u)", k->name,
             bytes, k->shared_optin);
    if (!tlm_device_outside_capture(d, what, err)) return false;
    if (d->backend->allow_shared && !d->backend->allow_shared(d, k->fn, k->name, bytes, err)) return false;
    k->shared_optin = bytes;
    return true;
}

/* ---- a profile's device table (kernel_times.h) ---- */

void tlm_device_time_kernels(tlm_device *d, tlm_kernel_times *t) { d->times = t; }

/* Whether the next launch or GEMM is timed: a table is attached, and the
 * work goes to the compute stream outside a capture (the comm stream's runs
 * beside it, and a capture runs nothing). */
static bool timed(const tlm_device *d) { return d->times && !d->capturing && d->launch_stream == TLM_STREAM_COMPUTE; }

/* Waits for the work before a timed one; false with err. *t0: its start. */
static bool timing_begins(tlm_device *d, double *t0, tlm_err *err) {
    if (!d->backend->sync(d, err)) return false;
    *t0 = seconds_now();
    return true;
}

/* Waits for the timed work that `ran` and adds its time to the table. */
static bool timing_ends(tlm_device *d, bool ran, double t0, const char *what, double flops, tlm_err *err) {
    if (!ran || !d->backend->sync(d, err)) return false;
    tlm_kernel_times_add(d->times, what, seconds_now() - t0, flops);
    return true;
}

bool tlm_device_launch(tlm_device *d, tlm_kernel *k, tlm_launch dims, void **args, tlm_err *err) {
    if (!k) return tlm_fail(err, "launch: no kernel");
    if (!check_dims(k->name, dims, err)) return false;
    if (d->launch_stream != TLM_STREAM_COMPUTE && !tlm_device_outside_capture(d, "a launch on the comm stream", err))
        return false;
    if (!allow_shared(d, k, dims.shared_bytes, err)) return false;
    if (!timed(d)) return d->backend->launch(d, k->fn, k->name, dims, args, err);
    double t0;
    return timing_begins(d, &t0, err) &&
           timing_ends(d, d->backend->launch(d, k->fn, k->name, dims, args, err), t0, k->name, 0, err);
}

/* ---- GEMM descriptions ---- */

static size_t dtype_size(tlm_gemm_type t) { return t == TLM_GEMM_BF16 ? 2 : 4; }

/* Elements from an operand's base to past its last element over the whole
 * batch, or -1 when that does not fit in an int64. */
static int64_t operand_extent(int64_t rows, int64_t cols, int64_t ld, int64_t batch, int64_t stride) {
    int64_t one, all;
    if (__builtin_mul_overflow(cols - 1, ld, &one) || __builtin_add_overflow(one, rows, &one)) return -1;
    if (__builtin_mul_overflow(batch - 1, stride, &all) || __builtin_add_overflow(all, one, &all)) return -1;
    if (__builtin_mul_overflow(all, (int64_t)4, &one)) return -1; /* bytes fit too */
    return all;
}

/* Whether batch entries of an m x n matrix (leading dimension ld >= m) at
 * offsets 0 and off share an element. Column j' of the second starts at
 * (q + j')·ld + s with off = q·ld + s, s < ld: it meets column q + j' of
 * the first when s < m, column q + j' + 1 when s + m > ld, no other. */
static bool entries_overlap(int64_t m, int64_t n, int64_t ld, int64_t off) {
    int64_t q = off / ld, s = off % ld;
    return (q < n && s < m) || (q + 1 < n && s + m > ld);
}

const char *tlm_gemm_problem(const tlm_gemm *g) {
    if (!g) return "no GEMM description";
    if (g->m < 1 || g->n < 1 || g->k < 1) return "m, n and k must each be at least 1";
    if (g->batch < 1) return "batch must be at least 1";
    if (g->batch > INT32_MAX) return "batch is above 2^31-1 (cuBLASLt counts it in 32 bits)";
    bool types_known = (g->a_type == TLM_GEMM_F32 || g->a_type == TLM_GEMM_BF16) &&
                       (g->b_type == TLM_GEMM_F32 || g->b_type == TLM_GEMM_BF16) &&
                       (g->cd_type == TLM_GEMM_F32 || g->cd_type == TLM_GEMM_BF16);
    if (!types_known) return "an operand type is neither TLM_GEMM_F32 nor TLM_GEMM_BF16";
    if (g->a_type != g->b_type) return "A and B must share a type";
    if (g->a_type == TLM_GEMM_F32 && g->cd_type != TLM_GEMM_F32)
        return "unsupported types: fp32 A and B need fp32 C and D (supported: f32,f32->f32, bf16,bf16->f32, "
               "bf16,bf16->bf16)";
    if (!g->a || !g->b || !g->d) return "A, B and D must be device addresses (not 0)";
    const int64_t a_rows = g->trans_a ? g->k : g->m, a_cols = g->trans_a ? g->m : g->k;
    const int64_t b_rows = g->trans_b ? g->n : g->k, b_cols = g->trans_b ? g->k : g->n;
    if (g->lda < a_rows) return "lda is less than the rows of stored A (m, or k when trans_a)";
    if (g->ldb < b_rows) return "ldb is less than the rows of stored B (k, or n when trans_b)";
    if (g->ldd < g->m) return "ldd is less than m";
    if (g->c && g->ldc < g->m) return "ldc is less than m";
    if (g->stride_a < 0 || g->stride_b < 0 || g->stride_c < 0 || g->stride_d < 0) return "a batch stride is negative";
    if (operand_extent(a_rows, a_cols, g->lda, g->batch, g->stride_a) < 0 ||
        operand_extent(b_rows, b_cols, g->ldb, g->batch, g->stride_b) < 0 ||
        operand_extent(g->m, g->n, g->ldd, g->batch, g->stride_d) < 0 ||
        (g->c && operand_extent(g->m, g->n, g->ldc, g->batch, g->stride_c) < 0))
        return "an operand's extent overflows 64 bits";
    /* Entry p + t meets entry p for some t exactly when it does at offset
     * t·stride_d; past one matrix's extent no later entry can. */
    const int64_t one_d = (g->n - 1) * g->ldd + g->m;
    for (int64_t t = 1; t < g->batch; t++) {
        int64_t off = t * g->stride_d;
        if (off >= one_d) break;
        if (entries_overlap(g->m, g->n, g->ldd, off))
            return "the batch entries of D overlap (stride_d too small for m, n and ldd)";
    }
    if (g->c && g->c == g->d && (g->ldc != g->ldd || g->stride_c != g->stride_d))
        return "C equals D but its ldc or stride_c differs from D's";
    const size_t ab = dtype_size(g->a_type), cd = dtype_size(g->cd_type);
    if (g->a % ab || g->b % ab || g->d % cd || g->c % cd)
        return "an operand address is not aligned to its element size";
    return NULL;
}

/* The bytes an operand spans (its extent in elements times their size). */
static bool check_operand(const device_core *c, const char *role, tlm_dptr p, tlm_gemm_type t, int64_t rows,
                          int64_t cols, int64_t ld, int64_t batch, int64_t stride, tlm_err *err) {
    uint64_t bytes = (uint64_t)operand_extent(rows, cols, ld, batch, stride) * dtype_size(t);
    if (inside_allocation(c, p, bytes)) return true;
    return tlm_fail(err, "GEMM: operand %s (%" PRIu64 " bytes from 0x%" PRIx64 ") is not inside one device allocation",
                    role, bytes, p);
}

bool tlm_device_gemm(tlm_device *d, const tlm_gemm *g, tlm_err *err) {
    const char *problem = tlm_gemm_problem(g);
    if (problem) return tlm_fail(err, "GEMM: %s", problem);
    const device_core *c = core_of(d);
    const int64_t a_rows = g->trans_a ? g->k : g->m, a_cols = g->trans_a ? g->m : g->k;
    const int64_t b_rows = g->trans_b ? g->n : g->k, b_cols = g->trans_b ? g->k : g->n;
    if (!check_operand(c, "A", g->a, g->a_type, a_rows, a_cols, g->lda, g->batch, g->stride_a, err) ||
        !check_operand(c, "B", g->b, g->b_type, b_rows, b_cols, g->ldb, g->batch, g->stride_b, err) ||
        !check_operand(c, "D", g->d, g->cd_type, g->m, g->n, g->ldd, g->batch, g->stride_d, err) ||
        (g->c && !check_operand(c, "C", g->c, g->cd_type, g->m, g->n, g->ldc, g->batch, g->stride_c, err)))
        return false;
    if (!timed(d)) return d->backend->gemm(d, g, err);
    double t0;
    if (!timing_begins(d, &t0, err)) return false;
    char what[64];
    snprintf(what, sizeof what, "gemm%s %c%c %s->%s%s", g->batch > 1 ? " batched" : "", g->trans_a ? 'T' : 'N',
             g->trans_b ? 'T' : 'N', g->a_type == TLM_GEMM_BF16 ? "bf16" : "f32",
             g->cd_type == TLM_GEMM_BF16 ? "bf16" : "f32", g->c && g->beta != 0 ? " +C" : "");
    const double flops = 2.0 * (double)g->m * (double)g->n * (double)g->k * (double)g->batch;
    return timing_ends(d, d->backend->gemm(d, g, err), t0, what, flops, err);
}
