/* gpu.spills: no kernel of the runtime's two modules (gpu.h, tlm_gpu_modules:
 * the runtime's kernels and the tensor-core attention) spills registers to
 * local memory, on sm_80 (A100) and sm_90 (H100, H200). Each module is
 * compiled by NVRTC with the options tlm-run uses (nvrtc_compile.c) and
 * ptxas's verbose report (tlm_nvrtc_ptxas_report), and for every kernel the
 * source declares, the report must say "0 bytes spill stores, 0 bytes spill
 * loads". A spill is memory traffic in a kernel's inner loop: the
 * tensor-core dk, dv kernel spilled 312 bytes a thread at head size 128
 * before its warps were split into a dV and a dK role (docs/gpu.md, "Tensor
 * cores").
 *
 * Registered only where CMake found the toolkit (as gpu.nvrtc); there,
 * NVRTC that does not load, a compile error, or a report that misses a
 * declared kernel is a failure, never a skip: the check must not pass by
 * not running. Prints each tensor-core kernel's registers, and the most any
 * runtime kernel uses. */
#include <ctype.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu.h"
#include "nvrtc_compile.h"

enum { MAX_KERNELS = 128, NAME_MAX_LEN = 96 };

/* One kernel's figures from ptxas's report. */
typedef struct {
    char name[NAME_MAX_LEN];
    int registers, stack, spill_stores, spill_loads;
    bool has_registers, has_spills;
} kernel_usage;

static int failures;

/* Prints "FAILED: " and the message, and counts it. */
static void fail(const char *format, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *format, ...) {
    va_list ap;
    va_start(ap, format);
    fputs("gpu.spills: FAILED: ", stderr);
    vfprintf(stderr, format, ap);
    fputc('\n', stderr);
    va_end(ap);
    failures++;
}

static const char IDENTIFIER_CHARS[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_";

/* The kernels source declares (tlm_gpu_next_kernel, as gpu.attention_tc
 * checks the modules) into names; their count, or -1 past max. */
static int declared_kernels(const char *source, char (*names)[NAME_MAX_LEN], int max) {
    int n = 0;
    size_t len;
    for (const char *p = tlm_gpu_next_kernel(source, &len); p; p = tlm_gpu_next_kernel(p + len, &len)) {
        if (len >= NAME_MAX_LEN) continue;
        if (n == max) return -1;
        snprintf(names[n++], NAME_MAX_LEN, "%.*s", (int)len, p);
    }
    return n;
}

/* ptxas's lines for arch, kernel by kernel, into usage; the count, or -1 on
 * a line that does not read as expected. ptxas prints, per kernel:
 *   ptxas info    : Compiling entry function 'NAME' for 'sm_90'
 *   ptxas info    : Function properties for NAME
 *   ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
 *   ptxas info    : Used 130 registers, used 1 barriers, 18432 bytes smem */
static int parse_report(const char *log, const char *arch, kernel_usage *usage, int max) {
    int n = 0;
    for (const char *line = log; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char text[512];
        snprintf(text, sizeof text, "%.*s", (int)(len < sizeof text ? len : sizeof text - 1), line);
        const char *entry = strstr(text, "Compiling entry function '");
        const char *spill = strstr(text, "bytes stack frame");
        const char *used = strstr(text, "Used ");
        if (entry) {
            if (n == max) return -1;
            kernel_usage *k = &usage[n++];
            memset(k, 0, sizeof *k);
            const char *name = entry + strlen("Compiling entry function '");
            size_t name_len = strspn(name, IDENTIFIER_CHARS);
            char for_arch[64];
            snprintf(for_arch, sizeof for_arch, "' for '%s'", arch);
            if (name_len == 0 || name_len >= NAME_MAX_LEN || strncmp(name + name_len, for_arch, strlen(for_arch)))
                return -1;
            snprintf(k->name, NAME_MAX_LEN, "%.*s", (int)name_len, name);
        } else if (spill && n > 0) {
            kernel_usage *k = &usage[n - 1];
            while (spill > text && spill[-1] == ' ') spill--;
            while (spill > text && isdigit((unsigned char)spill[-1])) spill--;
            if (sscanf(spill, "%d bytes stack frame, %d bytes spill stores, %d bytes spill loads", &k->stack,
                       &k->spill_stores, &k->spill_loads) != 3)
                return -1;
            k->has_spills = true;
        } else if (used && n > 0 && strstr(used, "registers")) {
            kernel_usage *k = &usage[n - 1];
            if (sscanf(used, "Used %d registers", &k->registers) != 1) return -1;
            k->has_registers = true;
        }
        if (!end) break;
        line = end + 1;
    }
    return n;
}

/* One compile's report: NVRTC's log, or NULL and why. */
typedef struct {
    const tlm_gpu_module_def *module;
    const char *arch;
    char *log;
    tlm_err err;
} report_job;

static void *run_report(void *arg) {
    report_job *job = arg;
    job->log = tlm_nvrtc_ptxas_report(job->module->source, job->arch, &job->err);
    return NULL;
}

/* The job's kernels against ptxas's report; frees the log. */
static void check_module(report_job *job) {
    const tlm_gpu_module_def *module = job->module;
    const char *arch = job->arch;
    static char names[MAX_KERNELS][NAME_MAX_LEN];
    static kernel_usage usage[MAX_KERNELS];
    int declared = declared_kernels(module->source, names, MAX_KERNELS);
    if (declared <= 0) {
        fail("%s: between 1 and %d kernels declared", module->what, MAX_KERNELS);
        return;
    }
    char *log = job->log;
    job->log = NULL;
    if (!log) {
        fail("%s for %s: no ptxas report: %s", module->what, arch, job->err.msg);
        return;
    }
    int reported = parse_report(log, arch, usage, MAX_KERNELS);
    free(log);
    if (reported < 0) {
        fail("%s for %s: ptxas's report does not read as expected", module->what, arch);
        return;
    }

    int most = 0;
    const char *most_name = "";
    for (int i = 0; i < declared; i++) {
        const kernel_usage *k = NULL;
        for (int j = 0; j < reported && !k; j++)
            if (strcmp(usage[j].name, names[i]) == 0) k = &usage[j];
        if (!k || !k->has_registers || !k->has_spills) {
            fail("%s for %s: ptxas reports no registers or spills for %s", module->what, arch, names[i]);
            continue;
        }
        if (k->spill_stores || k->spill_loads)
            fail("%s for %s: %s spills: %d bytes stored, %d loaded a thread (%d registers)", module->what, arch,
                 k->name, k->spill_stores, k->spill_loads, k->registers);
        if (module->prefix)
            printf("gpu.spills: %s %-32s %3d registers, %d bytes spill stores, %d loads, %d bytes stack\n", arch,
                   k->name, k->registers, k->spill_stores, k->spill_loads, k->stack);
        if (k->registers > most) most = k->registers, most_name = k->name;
    }
    if (reported != declared)
        fail("%s for %s: %d kernels reported, %d declared", module->what, arch, reported, declared);
    printf("gpu.spills: %s for %s: %d kernels, the most registers %d (%s)\n", module->what, arch, declared, most,
           most_name);
}

int main(void) {
    /* The four compiles in threads of their own (NVRTC compiles programs
     * apart in parallel), to keep the test's wall time down on two cores. */
    static const char *const archs[] = {"sm_80", "sm_90"};
    enum { NARCHS = sizeof archs / sizeof archs[0], NJOBS = TLM_GPU_MODULE_COUNT * NARCHS };
    report_job jobs[NJOBS];
    pthread_t threads[NJOBS];
    bool started[NJOBS];
    for (int j = 0; j < NJOBS; j++) {
        jobs[j] = (report_job){&tlm_gpu_modules[j / NARCHS], archs[j % NARCHS], NULL, {{0}}};
        started[j] = pthread_create(&threads[j], NULL, run_report, &jobs[j]) == 0;
        if (!started[j]) run_report(&jobs[j]);
    }
    for (int j = 0; j < NJOBS; j++) {
        if (started[j]) pthread_join(threads[j], NULL);
        check_module(&jobs[j]);
    }
    if (failures) {
        fprintf(stderr, "gpu.spills: %d check(s) failed\n", failures);
        return 1;
    }
    printf("gpu.spills: no kernel spills\n");
    return 0;
}
