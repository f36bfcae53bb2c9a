/* NVRTC: a CUDA C++ source to a CUBIN (nvrtc_compile.h). */
#include "nvrtc_compile.h"

#ifdef TLM_HAVE_CUDA

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_toolkit.h"

#ifndef TLM_CUDA_INCLUDE_DIR
#error "TLM_CUDA_INCLUDE_DIR (the toolkit's include folder) is set by runtime/CMakeLists.txt"
#endif

enum { MAX_OPTIONS = 8, LOG_LINES = 3 };

/* NVRTC 13 does not bundle cuda_bf16.h and friends: kernels that include
 * them find them in the toolkit's include folder. */
static const char INCLUDE_OPTION[] = "-I" TLM_CUDA_INCLUDE_DIR;

static int build_options(const char *arch, char *arch_option, size_t len, const char *options[MAX_OPTIONS]) {
    snprintf(arch_option, len, "--gpu-architecture=%s", arch);
    int n = 0;
    options[n++] = arch_option;
    options[n++] = "-std=c++17";
    options[n++] = "-default-device";
    options[n++] = INCLUDE_OPTION;
    options[n++] = "-lineinfo";
    return n;
}

void tlm_nvrtc_options(const char *arch, char *buf, size_t len) {
    char arch_option[64];
    const char *options[MAX_OPTIONS];
    int n = build_options(arch, arch_option, sizeof arch_option, options);
    size_t used = 0;
    if (len) buf[0] = '\0';
    for (int i = 0; i < n && used < len; i++) {
        int w = snprintf(buf + used, len - used, "%s%s", i ? " " : "", options[i]);
        if (w < 0) break;
        used += (size_t)w;
    }
}

static char version_text[32];
static pthread_once_t version_once = PTHREAD_ONCE_INIT;

/* "nvrtc 0.0" when NVRTC does not load (the device's opening says why). */
static void read_version(void) {
    const tlm_nvrtc_api *nv = tlm_nvrtc_api_get(NULL);
    int major = 0, minor = 0;
    if (!nv || nv->nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) major = minor = 0;
    snprintf(version_text, sizeof version_text, "nvrtc %d.%d", major, minor);
}

const char *tlm_nvrtc_version(void) {
    pthread_once(&version_once, read_version);
    return version_text;
}

bool tlm_nvrtc_supports(const char *arch) {
    const tlm_nvrtc_api *nv = tlm_nvrtc_api_get(NULL);
    int wanted = 0, count = 0;
    if (!nv || sscanf(arch, "sm_%d", &wanted) != 1) return false;
    if (nv->nvrtcGetNumSupportedArchs(&count) != NVRTC_SUCCESS || count <= 0) return false;
    int *archs = malloc((size_t)count * sizeof *archs);
    bool found = false;
    if (archs && nv->nvrtcGetSupportedArchs(archs) == NVRTC_SUCCESS) {
        for (int i = 0; i < count; i++) found = found || archs[i] == wanted;
    }
    free(archs);
    return found;
}

/* Appends line [p, p + n) to out (joined by " / "). */
static void append_line(char *out, size_t len, size_t *used, int *lines, const char *p, size_t n) {
    if ((*lines)++ && *used + 3 < len) {
        memcpy(out + *used, " / ", 3);
        *used += 3;
    }
    size_t room = *used + 1 < len ? len - *used - 1 : 0;
    size_t take = n < room ? n : room;
    memcpy(out + *used, p, take);
    *used += take;
    out[*used] = '\0';
}

/* The log's first error lines (NVRTC follows each with the source line and
 * a caret, which say little in one line), or its first lines when none
 * says "error". */
static void first_log_lines(const char *log, char *out, size_t len) {
    size_t used = 0;
    int lines = 0;
    out[0] = '\0';
    for (int pass = 0; pass < 2 && lines == 0; pass++) {
        for (const char *p = log; *p && lines < LOG_LINES;) {
            const char *end = strchr(p, '\n');
            size_t n = end ? (size_t)(end - p) : strlen(p);
            bool wanted = n > 0 && (pass == 1 || memmem(p, n, "error", 5) != NULL);
            if (wanted) append_line(out, len, &used, &lines, p, n);
            if (!end) break;
            p = end + 1;
        }
    }
}

static bool nvrtc_ok(const tlm_nvrtc_api *nv, nvrtcResult r, const char *call, tlm_err *err) {
    if (r == NVRTC_SUCCESS) return true;
    return tlm_fail(err, "NVRTC %s: %s", call, nv->nvrtcGetErrorString(r));
}

/* Creates and compiles a program of source for arch with the options
 * build_options gives, and `extra` after them when not NULL. On success the
 * program, to read and destroy; on failure false with err (NVRTC's log's
 * first lines for a compile error) and nothing to destroy. */
static bool compile_program(const tlm_nvrtc_api *nv, const char *source, const char *arch, const char *extra,
                            nvrtcProgram *prog, tlm_err *err) {
    char arch_option[64];
    const char *options[MAX_OPTIONS];
    int noptions = build_options(arch, arch_option, sizeof arch_option, options);
    if (extra) options[noptions++] = extra;

    if (!nvrtc_ok(nv, nv->nvrtcCreateProgram(prog, source, "tlm.cu", 0, NULL, NULL), "nvrtcCreateProgram", err))
        return false;
    nvrtcResult r = nv->nvrtcCompileProgram(*prog, noptions, options);
    if (r == NVRTC_SUCCESS) return true;
    if (r == NVRTC_ERROR_COMPILATION || r == NVRTC_ERROR_INVALID_OPTION) {
        size_t log_size = 0;
        char *log = NULL;
        if (nv->nvrtcGetProgramLogSize(*prog, &log_size) == NVRTC_SUCCESS && log_size > 0) log = malloc(log_size + 1);
        if (log && nv->nvrtcGetProgramLog(*prog, log) == NVRTC_SUCCESS) {
            log[log_size] = '\0';
            char lines[400];
            first_log_lines(log, lines, sizeof lines);
            tlm_fail(err, "NVRTC (%s) could not compile it: %s", arch, lines[0] ? lines : nv->nvrtcGetErrorString(r));
        } else {
            tlm_fail(err, "NVRTC (%s) could not compile it: %s (no log)", arch, nv->nvrtcGetErrorString(r));
        }
        free(log);
    } else {
        nvrtc_ok(nv, r, "nvrtcCompileProgram", err);
    }
    nv->nvrtcDestroyProgram(prog);
    return false;
}

bool tlm_nvrtc_compile(const char *source, const char *arch, uint8_t **cubin, size_t *size, tlm_err *err) {
    *cubin = NULL;
    *size = 0;
    const tlm_nvrtc_api *nv = tlm_nvrtc_api_get(err);
    nvrtcProgram prog;
    if (!nv || !compile_program(nv, source, arch, NULL, &prog, err)) return false;
    bool ok = false;
    size_t n = 0;
    if (nvrtc_ok(nv, nv->nvrtcGetCUBINSize(prog, &n), "nvrtcGetCUBINSize", err)) {
        /* A virtual architecture (compute_XY) compiles to PTX only and
         * leaves the CUBIN empty: say so rather than load nothing. */
        if (n == 0) {
            tlm_fail(err, "NVRTC produced no CUBIN for %s (a virtual architecture?)", arch);
        } else if (!(*cubin = malloc(n))) {
            tlm_fail(err, "out of memory for a %zu-byte CUBIN", n);
        } else if (nvrtc_ok(nv, nv->nvrtcGetCUBIN(prog, (char *)*cubin), "nvrtcGetCUBIN", err)) {
            *size = n;
            ok = true;
        } else {
            free(*cubin);
            *cubin = NULL;
        }
    }
    nv->nvrtcDestroyProgram(&prog);
    return ok;
}

char *tlm_nvrtc_ptxas_report(const char *source, const char *arch, tlm_err *err) {
    const tlm_nvrtc_api *nv = tlm_nvrtc_api_get(err);
    nvrtcProgram prog;
    if (!nv || !compile_program(nv, source, arch, "--ptxas-options=-v", &prog, err)) return NULL;
    size_t n = 0;
    char *log = NULL;
    if (nvrtc_ok(nv, nv->nvrtcGetProgramLogSize(prog, &n), "nvrtcGetProgramLogSize", err)) {
        if (!(log = malloc(n + 1))) {
            tlm_fail(err, "out of memory for a %zu-byte NVRTC log", n);
        } else if (nvrtc_ok(nv, nv->nvrtcGetProgramLog(prog, log), "nvrtcGetProgramLog", err)) {
            log[n] = '\0';
        } else {
            free(log);
            log = NULL;
        }
    }
    nv->nvrtcDestroyProgram(&prog);
    return log;
}

#else
/* Built without the CUDA toolkit: no NVRTC, and no caller (device_cuda.c
 * and the gpu.nvrtc test are off). */
typedef int tlm_nvrtc_compile_unused;
#endif
