/* The emulated CUDA device (device_impl.h's table "emulated"): memory is
 * host memory, a module is the CUDA source compiled by the host C++
 * compiler against cuda_emu.h into a shared object, and a GEMM is the plain
 * loop of gemm_reference.c. It runs the very same kernel source and GEMM
 * descriptions as the real device, so CI without a GPU checks them.
 *
 * Streams: compute work runs at once, as it is issued; the comm stream's
 * host calls (the stand-in for NCCL) are deferred, and run only when the
 * compute stream waits for an event recorded on the comm stream after
 * them, or at a sync. A reader on the compute stream that
 * forgot to wait therefore sees the values from before the
 * communication, and the results differ from one process's (docs/gpu.md). */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "device_impl.h"
#include "emu_graph.h"
#include "gemm_reference.h"
#include "regular_file.h"
#include "sha256.h"

#ifdef MFD_EXEC
#define TLM_MFD_EXEC MFD_EXEC
#else
#define TLM_MFD_EXEC 0x0010u /* linux/memfd.h, Linux 6.3 */
#endif

extern char **environ;
extern const char tlm_cuda_emu_header[]; /* runtime/device/cuda_emu.h, embedded at build time */

/* The flags every module is compiled with; the header's hash is appended in
 * the options string so a changed emulator never reuses a cached module.
 * No contraction: __fmul_rn and __fadd_rn are plain operators here, which a
 * host compiler that fuses by default (aarch64's) would merge into what
 * follows, where a GPU rounds each (x86-64 without -mfma fuses nothing).
 * Hidden visibility (the launch entry points are exported by name) keeps
 * each module's symbols its own: a __shared__ array in a kernel template is
 * a function-local static, which g++ otherwise binds STB_GNU_UNIQUE, one
 * copy for the whole process, so a second module loaded (another model's,
 * or the same source compiled again) ran its blocks on the first module's
 * shared memory. */
#define EMU_FLAGS "-std=c++17", "-O1", "-ffp-contract=off", "-fPIC", "-shared", "-fvisibility=hidden", "-w"
#define EMU_FLAGS_TEXT "-std=c++17 -O1 -ffp-contract=off -fPIC -shared -fvisibility=hidden -w -include cuda_emu.h"

/* A compiled module is at most this large (the runtime's is well under a MiB). */
#define MAX_MODULE_BYTES ((uint64_t)1 << 30)

/* A host call queued on the comm stream. */
typedef struct emu_call {
    void (*fn)(void *ctx);
    void *ctx;
} emu_call;

typedef struct emu_state {
    char cxx[1024];      /* $TLM_EMU_CXX, else the configured compiler */
    char options[160];   /* EMU_FLAGS_TEXT and the header's SHA-256 */
    char id[256];        /* the compiler's --version line, once asked */
    /* The comm stream: calls [ran, queued) of all ever queued wait in
     * pending[0, queued - ran). */
    emu_call *pending;
    size_t cap;
    uint64_t queued, ran;
    bool running;        /* inside one of its calls: launches on it run in place */
    tlm_emu_graph *recording; /* the graph being captured (d->capturing) */
} emu_state;

/* A loaded module: the shared object and the kernels looked up in it. */
typedef struct emu_module {
    void *dl;
    tlm_emu_kernel *kernels;
} emu_module;

/* An event: on the compute stream it is complete when recorded (that
 * stream has run everything already); on the comm stream it marks the
 * calls queued so far. */
typedef struct emu_event {
    bool on_comm;
    uint64_t mark;
} emu_event;

static emu_state *state_of(tlm_device *d) { return d->impl; }

/* ---- running the compiler: posix_spawnp, no shell, output through a pipe ---- */

/* Runs argv[0] (looked up on PATH) with stdin from /dev/null and stdout and
 * stderr into *output (malloc'd, NUL-terminated, at most cap bytes kept;
 * the rest is read and dropped so the child never blocks). *status is the
 * wait status. false with err when it cannot be started. */
static bool run_captured(char *const argv[], size_t cap, char **output, int *status, tlm_err *err) {
    *output = NULL;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return tlm_fail(err, "cannot run %s: pipe: %s", argv[0], strerror(errno));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (rc != 0) {
        close(fds[0]);
        return tlm_fail(err, "cannot run %s: %s", argv[0], strerror(rc));
    }
    char *buf = malloc(cap + 1);
    size_t used = 0;
    char sink[4096];
    for (;;) {
        bool keep = buf && used < cap;
        ssize_t n = keep ? read(fds[0], buf + used, cap - used) : read(fds[0], sink, sizeof sink);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        if (keep) used += (size_t)n;
    }
    close(fds[0]);
    while (waitpid(pid, status, 0) < 0) {
        if (errno != EINTR) {
            free(buf);
            return tlm_fail(err, "cannot wait for %s: %s", argv[0], strerror(errno));
        }
    }
    if (!buf) return tlm_fail(err, "out of memory reading the output of %s", argv[0]);
    buf[used] = '\0';
    *output = buf;
    return true;
}

static const char *emu_compiler_id(tlm_device *d) {
    emu_state *s = state_of(d);
    if (s->id[0]) return s->id;
    char *argv[] = {s->cxx, "--version", NULL};
    char *out = NULL;
    int status = 0;
    tlm_err err = {{0}};
    if (run_captured(argv, 4096, &out, &status, &err) && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        out[strcspn(out, "\n")] = '\0';
        snprintf(s->id, sizeof s->id, "%s", out);
    }
    free(out);
    /* Unknown is cached too: the compile that follows says what is wrong. */
    if (!s->id[0]) snprintf(s->id, sizeof s->id, "unknown C++ compiler %.200s", s->cxx);
    return s->id;
}

static const char *emu_compile_options(tlm_device *d) { return state_of(d)->options; }

/* ---- the kernels of a source: every extern "C" __global__ void NAME( ---- */

typedef struct name_list {
    char **names;
    size_t n, cap;
} name_list;

static void free_names(name_list *l) {
    for (size_t i = 0; i < l->n; i++) free(l->names[i]);
    free(l->names);
}

static bool is_ident(char c) {
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static const char *skip_space(const char *p) {
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    return p;
}

/* p past word when it starts there as a whole token, else NULL. */
static const char *take_word(const char *p, const char *word) {
    size_t n = strlen(word);
    if (strncmp(p, word, n) != 0 || is_ident(p[n])) return NULL;
    return p + n;
}

static const char *skip_parens(const char *p) {
    int depth = 0;
    for (; *p; p++) {
        if (*p == '(') depth++;
        if (*p == ')' && --depth == 0) return p + 1;
    }
    return NULL;
}

/* The kernel named right after `extern "C"` at p, if one is declared
 * there: its name's start and length. */
static bool kernel_at(const char *p, const char **name, size_t *len) {
    if (!(p = take_word(p, "extern"))) return false;
    p = skip_space(p);
    if (strncmp(p, "\"C\"", 3) != 0) return false;
    if (!(p = take_word(skip_space(p + 3), "__global__"))) return false;
    if (!(p = take_word(skip_space(p), "void"))) return false;
    p = skip_space(p);
    const char *bounds = take_word(p, "__launch_bounds__");
    if (bounds) {
        p = skip_space(bounds);
        if (*p != '(' || !(p = skip_parens(p))) return false;
        p = skip_space(p);
    }
    const char *start = p;
    while (is_ident(*p)) p++;
    if (p == start || (*start >= '0' && *start <= '9') || *skip_space(p) != '(') return false;
    *name = start;
    *len = (size_t)(p - start);
    return true;
}

static bool add_name(name_list *l, const char *name, size_t len) {
    for (size_t i = 0; i < l->n; i++)
        if (strlen(l->names[i]) == len && strncmp(l->names[i], name, len) == 0) return true;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        char **grown = realloc(l->names, cap * sizeof *grown);
        if (!grown) return false;
        l->names = grown;
        l->cap = cap;
    }
    if (!(l->names[l->n] = strndup(name, len))) return false;
    l->n++;
    return true;
}

/* Scans the text for kernel declarations, skipping comments, string and
 * character literals (a kernel commented out is not one). */
static bool scan_kernels(const char *src, name_list *l) {
    for (const char *p = src; *p;) {
        if (p[0] == '/' && p[1] == '/') {
            p += strcspn(p, "\n");
        } else if (p[0] == '/' && p[1] == '*') {
            const char *end = strstr(p + 2, "*/");
            p = end ? end + 2 : p + strlen(p);
        } else if (*p == '"' || *p == '\'') {
            char quote = *p++;
            while (*p && *p != quote && *p != '\n') p += (*p == '\\' && p[1]) ? 2 : 1;
            if (*p == quote) p++;
        } else if ((p == src || !is_ident(p[-1])) && *p == 'e') {
            const char *name;
            size_t len;
            if (kernel_at(p, &name, &len)) {
                if (!add_name(l, name, len)) return false;
                p = name + len;
            } else {
                p++;
            }
        } else {
            p++;
        }
    }
    return true;
}

/* ---- compiling: a private temporary folder, the compiler, the .so bytes ---- */

static bool write_file(const char *path, const char *parts[], int nparts, tlm_err *err) {
    FILE *f = fopen(path, "wbx");
    if (!f) return tlm_fail(err, "cannot create %s: %s", path, strerror(errno));
    bool ok = true;
    for (int i = 0; i < nparts; i++) ok = ok && fputs(parts[i], f) >= 0;
    if (fclose(f) != 0) ok = false;
    if (!ok) return tlm_fail(err, "cannot write %s: %s", path, strerror(errno));
    return true;
}

/* The compiler's first error lines, joined by " | ", without the temporary
 * folder's name; its first lines when none says "error". */
static void first_errors(const char *output, const char *dir, char *out, size_t size) {
    out[0] = '\0';
    size_t used = 0, dirlen = strlen(dir);
    int taken = 0;
    bool any_error = strstr(output, "error") != NULL;
    for (const char *line = output; *line && taken < 3;) {
        size_t len = strcspn(line, "\n");
        bool wanted = len > 0 && (!any_error || memmem(line, len, "error", 5) != NULL);
        if (wanted) {
            for (size_t i = 0; i < len && used + 4 < size;) {
                if (i + dirlen + 1 <= len && strncmp(line + i, dir, dirlen) == 0 && line[i + dirlen] == '/') {
                    i += dirlen + 1;
                    continue;
                }
                out[used++] = line[i++];
            }
            if (used + 4 < size && ++taken < 3) {
                memcpy(out + used, " | ", 3);
                used += 3;
            }
            out[used] = '\0';
        }
        line += len + (line[len] == '\n');
    }
    /* Drop a trailing separator. */
    if (used >= 3 && strcmp(out + used - 3, " | ") == 0) out[used - 3] = '\0';
    if (!out[0]) snprintf(out, size, "%s", "no message");
}

static bool join_path(char *path, size_t size, const char *dir, const char *name) {
    int n = snprintf(path, size, "%s/%s", dir, name);
    return n >= 0 && (size_t)n < size;
}

static void remove_folder(const char *dir) {
    static const char *const files[] = {"cuda_emu.h", "source.cu", "module.so"};
    char path[4096];
    for (size_t i = 0; i < sizeof files / sizeof *files; i++)
        if (join_path(path, sizeof path, dir, files[i])) unlink(path);
    rmdir(dir);
}

static bool compile_in(emu_state *s, const char *dir, const char *what, const char *source, const char *exports,
                       uint8_t **bin, size_t *size, tlm_err *err) {
    char header[4096], src[4096], so[4096];
    if (!join_path(header, sizeof header, dir, "cuda_emu.h") || !join_path(src, sizeof src, dir, "source.cu") ||
        !join_path(so, sizeof so, dir, "module.so"))
        return tlm_fail(err, "cannot compile %s: the temporary folder's name %s is too long", what, dir);
    const char *header_parts[] = {tlm_cuda_emu_header};
    /* The kernels' lines keep their numbers: the exports come after. */
    const char *source_parts[] = {source, "\n", exports};
    if (!write_file(header, header_parts, 1, err) || !write_file(src, source_parts, 3, err)) return false;
    char *argv[] = {s->cxx, EMU_FLAGS, "-include", header, "-x", "c++", src, "-o", so, NULL};
    char *out = NULL;
    int status = 0;
    tlm_err why = {{0}};
    if (!run_captured(argv, 64 * 1024, &out, &status, &why))
        return tlm_fail(err, "cannot compile %s: %s (TLM_EMU_CXX names the C++ compiler)", what, why.msg);
    bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok) {
        char lines[400];
        first_errors(out, dir, lines, sizeof lines);
        if (WIFSIGNALED(status))
            tlm_fail(err, "cannot compile %s: %s died of signal %d: %s", what, s->cxx, WTERMSIG(status), lines);
        else tlm_fail(err, "cannot compile %s: %s", what, lines);
    }
    free(out);
    if (!ok) return false;
    *bin = tlm_read_regular(so, MAX_MODULE_BYTES, "a compiled module", size, err);
    return *bin != NULL;
}

static bool emu_compile(tlm_device *d, const char *what, const char *source, uint8_t **bin, size_t *size,
                        tlm_err *err) {
    name_list names = {0};
    if (!scan_kernels(source, &names)) {
        free_names(&names);
        return tlm_fail(err, "out of memory scanning %s", what);
    }
    /* One TLM_EMU_EXPORT(name) line per kernel: cuda_emu.h turns each into
     * the entry point tlm_emu_launch_<name>. */
    size_t need = 1;
    for (size_t i = 0; i < names.n; i++) need += strlen(names.names[i]) + sizeof "TLM_EMU_EXPORT()\n";
    char *exports = malloc(need);
    if (!exports) {
        free_names(&names);
        return tlm_fail(err, "out of memory compiling %s", what);
    }
    size_t used = 0;
    exports[0] = '\0';
    for (size_t i = 0; i < names.n; i++)
        used += (size_t)sprintf(exports + used, "TLM_EMU_EXPORT(%s)\n", names.names[i]);
    free_names(&names);

    const char *tmp = getenv("TMPDIR");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tlm-emu-XXXXXX", tmp && tmp[0] == '/' ? tmp : "/tmp");
    bool ok = mkdtemp(dir) != NULL;
    if (!ok) tlm_fail(err, "cannot compile %s: cannot create a temporary folder %s: %s", what, dir, strerror(errno));
    else {
        ok = compile_in(state_of(d), dir, what, source, exports, bin, size, err);
        remove_folder(dir);
    }
    free(exports);
    return ok;
}

/* ---- loading: the bytes through a sealed memory file ---- */

/* As abi/model_so.c loads a model.so: nothing on disk can change between
 * compile (or the cache's hash check) and load. */
static bool emu_load(tlm_device *d, const char *what, const uint8_t *bin, size_t size, void **handle, tlm_err *err) {
    (void)d;
    int fd = memfd_create("tlm:emulated-module", MFD_CLOEXEC | MFD_ALLOW_SEALING | TLM_MFD_EXEC);
    if (fd < 0 && errno == EINVAL) fd = memfd_create("tlm:emulated-module", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return tlm_fail(err, "cannot load %s: memfd_create: %s", what, strerror(errno));
    for (size_t done = 0; done < size;) {
        ssize_t w = write(fd, bin + done, size - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            close(fd);
            return tlm_fail(err, "cannot load %s: copying it to memory: %s", what,
                            w < 0 ? strerror(errno) : "no space");
        }
        done += (size_t)w;
    }
    (void)fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
    /* dlopen hands back an object already loaded under the same name, and
     * an unloaded module whose descriptor had this number may stay loaded
     * (dlclose keeps an object whose thread_local destructors are pending,
     * as cuda_emu.h's are until the thread exits): take the lowest number
     * no loaded object is named after, holding one extra descriptor at a
     * time. */
    int cur = fd;
    char proc[64];
    bool ok = true;
    for (;;) {
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", cur);
        void *taken = dlopen(proc, RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
        if (!taken) break;
        dlclose(taken);
        int next = fcntl(fd, F_DUPFD_CLOEXEC, cur + 1);
        if (cur != fd) close(cur);
        cur = next;
        if (cur < 0) {
            ok = tlm_fail(err, "cannot load %s: every descriptor number names a module still loaded", what);
            break;
        }
    }
    emu_module *m = ok ? calloc(1, sizeof *m) : NULL;
    if (ok && !m) ok = tlm_fail(err, "cannot load %s: out of memory", what);
    if (ok) {
        (void)dlerror();
        m->dl = dlopen(proc, RTLD_NOW | RTLD_LOCAL);
        if (!m->dl) ok = tlm_fail(err, "cannot load %s: %s", what, dlerror());
    }
    if (ok) *handle = m;
    else free(m);
    if (cur >= 0 && cur != fd) close(cur);
    close(fd);
    return ok;
}

static void emu_unload(tlm_device *d, void *handle) {
    (void)d;
    emu_module *m = handle;
    if (!m) return;
    while (m->kernels) {
        tlm_emu_kernel *next = m->kernels->next;
        free(m->kernels);
        m->kernels = next;
    }
    if (m->dl) dlclose(m->dl);
    free(m);
}

/* dlsym's object pointer as the function it is. */
static void *module_symbol(emu_module *m, const char *prefix, const char *name, tlm_err *err) {
    char symbol[512];
    int n = snprintf(symbol, sizeof symbol, "%s%s", prefix, name);
    if (n < 0 || (size_t)n >= sizeof symbol) {
        tlm_fail(err, "no kernel %.64s... (name too long)", name);
        return NULL;
    }
    (void)dlerror();
    void *p = dlsym(m->dl, symbol);
    if (!p) tlm_fail(err, "no kernel %s (no extern \"C\" __global__ void %s in the source)", name, name);
    return p;
}

/* A kernel's handle: cuda_emu.h's two entry points (TLM_EMU_EXPORT) and
 * its parameters' sizes, asked once. */
/* The emulator cannot tell a kernel's static shared memory (its __shared__
 * variables are the module's thread-local block, all kernels' together):
 * 0, so only the real device counts it against the limits. */
static bool emu_kernel(tlm_device *d, void *module, const char *name, void **fn, unsigned *static_shared,
                       tlm_err *err) {
    (void)d;
    *static_shared = 0;
    emu_module *m = module;
    void *launch = module_symbol(m, "tlm_emu_launch_", name, err);
    void *sizes = launch ? module_symbol(m, "tlm_emu_arg_sizes_", name, err) : NULL;
    if (!sizes) return false;
    tlm_emu_arg_sizes arg_sizes;
    memcpy(&arg_sizes, &sizes, sizeof arg_sizes);
    int n = arg_sizes(NULL, 0);
    tlm_emu_kernel *k = calloc(1, sizeof *k + (size_t)(n > 0 ? n : 1) * sizeof(size_t));
    if (!k) return tlm_fail(err, "out of memory looking up kernel %s", name);
    memcpy(&k->entry, &launch, sizeof k->entry);
    k->sizes = (size_t *)(k + 1);
    k->nargs = arg_sizes(k->sizes, n);
    k->next = m->kernels;
    m->kernels = k;
    *fn = k;
    return true;
}

static bool emu_launch(tlm_device *d, void *fn, const char *name, tlm_launch dims, void **args, tlm_err *err) {
    /* A deferred launch would need its arguments' values copied, whose
     * sizes only the kernel knows: the comm stream takes launches from its
     * own host calls, which run them in place, in the stream's order. */
    if (d->launch_stream == TLM_STREAM_COMM && !state_of(d)->running)
        return tlm_fail(
            err, "kernel %s: the emulated device runs launches on the comm stream only from a host call there", name);
    if (d->capturing) return tlm_emu_graph_launch(state_of(d)->recording, fn, name, dims, args, err);
    return tlm_emu_run_launch(fn, name, dims, args, err);
}

/* ---- memory: host memory ---- */

static tlm_dptr emu_alloc(tlm_device *d, size_t bytes, tlm_err *err) {
    (void)d;
    size_t rounded = (bytes + 255) / 256 * 256;
    void *p = rounded >= bytes ? aligned_alloc(256, rounded) : NULL;
    if (!p) {
        tlm_fail(err, "out of memory: cannot allocate %zu bytes on the emulated device", bytes);
        return 0;
    }
    memset(p, 0, rounded);
    return (tlm_dptr)(uintptr_t)p;
}

static void emu_free(tlm_device *d, tlm_dptr p) {
    (void)d;
    free((void *)(uintptr_t)p);
}

static bool emu_upload(tlm_device *d, tlm_dptr dst, const void *src, size_t bytes, tlm_err *err) {
    (void)d;
    (void)err;
    memcpy((void *)(uintptr_t)dst, src, bytes);
    return true;
}

static bool emu_download(tlm_device *d, void *dst, tlm_dptr src, size_t bytes, tlm_err *err) {
    (void)d;
    (void)err;
    memcpy(dst, (const void *)(uintptr_t)src, bytes);
    return true;
}

static bool emu_copy(tlm_device *d, tlm_dptr dst, tlm_dptr src, size_t bytes, tlm_err *err) {
    if (d->capturing) return tlm_emu_graph_copy(state_of(d)->recording, dst, src, bytes, err);
    memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, bytes);
    return true;
}

static bool emu_zero(tlm_device *d, tlm_dptr dst, size_t bytes, tlm_err *err) {
    if (d->capturing) return tlm_emu_graph_zero(state_of(d)->recording, dst, bytes, err);
    memset((void *)(uintptr_t)dst, 0, bytes);
    return true;
}

/* ---- the comm stream: deferred host calls ---- */

/* Runs the comm stream's calls until `until` of them have run (not from
 * inside one: a call that waits on its own stream would wait forever on a
 * GPU; here it returns at once). */
static void run_comm(emu_state *s, uint64_t until) {
    if (s->running) return;
    s->running = true;
    size_t done = 0;
    while (s->ran < until && s->ran < s->queued) {
        emu_call call = s->pending[done++];
        s->ran++;
        call.fn(call.ctx);
    }
    /* done is 0 when nothing is queued, pending then perhaps still NULL */
    if (done) memmove(s->pending, s->pending + done, (size_t)(s->queued - s->ran) * sizeof *s->pending);
    s->running = false;
}

static bool emu_comm_host_call(tlm_device *d, void (*fn)(void *ctx), void *ctx, tlm_err *err) {
    emu_state *s = state_of(d);
    size_t n = (size_t)(s->queued - s->ran);
    if (n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        emu_call *p = realloc(s->pending, cap * sizeof *p);
        if (!p) return tlm_fail(err, "out of memory for the emulated device's comm stream");
        s->pending = p;
        s->cap = cap;
    }
    s->pending[n] = (emu_call){fn, ctx};
    s->queued++;
    return true;
}

static bool emu_event_create(tlm_device *d, void **event, tlm_err *err) {
    (void)d;
    if (!(*event = calloc(1, sizeof(emu_event)))) return tlm_fail(err, "out of memory for a device event");
    return true;
}

static void emu_event_destroy(tlm_device *d, void *event) {
    (void)d;
    free(event);
}

static bool emu_event_record(tlm_device *d, void *event, tlm_stream st, tlm_err *err) {
    (void)err;
    emu_event *e = event;
    e->on_comm = st == TLM_STREAM_COMM;
    e->mark = state_of(d)->queued;
    return true;
}

/* The compute stream waiting runs the comm stream up to the event; the
 * comm stream waiting has nothing to do: the compute stream's work, and
 * the comm stream's own before it, come first anyway. */
static bool emu_stream_wait(tlm_device *d, tlm_stream st, void *event, tlm_err *err) {
    (void)err;
    const emu_event *e = event;
    if (st == TLM_STREAM_COMPUTE && e->on_comm) run_comm(state_of(d), e->mark);
    return true;
}

/* Compute work has run to completion before it returned; the comm
 * stream's runs now. */
static bool emu_sync(tlm_device *d, tlm_err *err) {
    (void)err;
    emu_state *s = state_of(d);
    run_comm(s, s->queued);
    return true;
}

static bool emu_gemm(tlm_device *d, const tlm_gemm *g, tlm_err *err) {
    if (d->launch_stream != TLM_STREAM_COMPUTE) return tlm_fail(err, "GEMMs run on the compute stream only");
    if (d->capturing) return tlm_emu_graph_gemm(state_of(d)->recording, g, err);
    tlm_gemm_reference(g);
    return true;
}

/* ---- graphs: recorded calls (emu_graph.h) ---- */

static bool emu_capture_begin(tlm_device *d, tlm_err *err) {
    emu_state *s = state_of(d);
    tlm_emu_graph_free(s->recording);
    if (!(s->recording = tlm_emu_graph_new())) return tlm_fail(err, "out of memory for a CUDA graph");
    return true;
}

static bool emu_capture_end(tlm_device *d, bool keep, void **graph, tlm_err *err) {
    (void)err;
    emu_state *s = state_of(d);
    if (keep) *graph = s->recording;
    else tlm_emu_graph_free(s->recording);
    s->recording = NULL;
    return true;
}

/* The compute stream runs work at once: so does a graph launch. */
static bool emu_graph_launch(tlm_device *d, void *graph, tlm_err *err) {
    (void)d;
    return tlm_emu_graph_run(graph, err);
}

static void emu_graph_destroy(tlm_device *d, void *graph) {
    (void)d;
    tlm_emu_graph_free(graph);
}

/* ---- the device ---- */

static bool emu_open(tlm_device *d, int ordinal, tlm_err *err) {
    if (ordinal != 0) return tlm_fail(err, "no CUDA device %d (the emulated device is cuda:0 alone)", ordinal);
    emu_state *s = calloc(1, sizeof *s);
    if (!s) return tlm_fail(err, "out of memory opening the emulated device");
    const char *cxx = getenv("TLM_EMU_CXX");
    snprintf(s->cxx, sizeof s->cxx, "%s", cxx && cxx[0] ? cxx : TLM_EMU_CXX_DEFAULT);
    uint8_t digest[TLM_SHA256_SIZE];
    tlm_sha256(tlm_cuda_emu_header, strlen(tlm_cuda_emu_header), digest);
    int n = snprintf(s->options, sizeof s->options, "%s (cuda_emu.h sha256 ", EMU_FLAGS_TEXT);
    for (int i = 0; i < TLM_SHA256_SIZE; i++)
        n += snprintf(s->options + n, sizeof s->options - (size_t)n, "%02x", digest[i]);
    snprintf(s->options + n, sizeof s->options - (size_t)n, ")");
    d->impl = s;
    tlm_device_info *info = &d->info;
    snprintf(info->name, sizeof info->name, "%s", "emulated CUDA device (CPU)");
    info->emulated = true;
    info->ordinal = 0;
    info->cc_major = 9;
    info->cc_minor = 0;
    snprintf(info->arch, sizeof info->arch, "%s", "sm_90");
    info->driver_version = 0;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    info->sm_count = cpus > 0 ? (int)cpus : 1;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    info->memory_total = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
    info->shared_optin = 227 * 1024; /* sm_90's, so a kernel that would not fit on an H100 fails here too */
    return true;
}

static void emu_close(tlm_device *d) {
    emu_state *s = state_of(d);
    /* Calls still queued are dropped: the memory they would touch is
     * already freed (tlm_device_close frees it first). A correct caller
     * has waited for them. */
    free(s->pending);
    tlm_emu_graph_free(s->recording);
    free(d->impl);
    d->impl = NULL;
}

const tlm_device_backend tlm_device_emulated = {
    .name = "emulated",
    .open = emu_open,
    .close = emu_close,
    .alloc = emu_alloc,
    .free = emu_free,
    .upload = emu_upload,
    .download = emu_download,
    .copy = emu_copy,
    .zero = emu_zero,
    .sync = emu_sync,
    .compiler_id = emu_compiler_id,
    .compile_options = emu_compile_options,
    .compile = emu_compile,
    .load = emu_load,
    .unload = emu_unload,
    .kernel = emu_kernel,
    .launch = emu_launch,
    .gemm = emu_gemm,
    .event_create = emu_event_create,
    .event_destroy = emu_event_destroy,
    .event_record = emu_event_record,
    .stream_wait = emu_stream_wait,
    .comm_host_call = emu_comm_host_call,
    .capture_begin = emu_capture_begin,
    .capture_end = emu_capture_end,
    .graph_launch = emu_graph_launch,
    .graph_destroy = emu_graph_destroy,
};
