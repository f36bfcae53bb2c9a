/* The emulated device's graphs (emu_graph.h). */
#include "emu_graph.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_reference.h"

/* Each argument value starts on a 16-byte boundary of the arguments'
 * bytes, as the widest kernel parameter type (a 16-byte vector) needs. */
enum { ARG_ALIGN = 16, MAX_ARGS = 64, NAME_BYTES = 96 };

typedef enum record_kind { RECORD_LAUNCH, RECORD_GEMM, RECORD_COPY, RECORD_ZERO } record_kind;

typedef struct record {
    record_kind kind;
    const tlm_emu_kernel *kernel; /* RECORD_LAUNCH */
    char name[NAME_BYTES];        /* the kernel's, for messages */
    tlm_launch dims;
    size_t args_at;               /* into the graph's argument bytes */
    tlm_gemm gemm;                /* RECORD_GEMM */
    tlm_dptr dst, src;            /* RECORD_COPY, RECORD_ZERO */
    size_t bytes;
} record;

struct tlm_emu_graph {
    record *records;
    size_t n, cap;
    unsigned char *args; /* the launches' argument values, copied at record time */
    size_t args_used, args_cap;
};

static size_t align_up(size_t n) { return (n + ARG_ALIGN - 1) / ARG_ALIGN * ARG_ALIGN; }

bool tlm_emu_run_launch(const tlm_emu_kernel *k, const char *name, tlm_launch dims, void **args, tlm_err *err) {
    char msg[400] = "";
    if (k->entry(dims.grid, dims.block, dims.shared_bytes, args, msg, sizeof msg) != 0)
        return tlm_fail(err, "kernel %s: %s", name, msg[0] ? msg : "failed on the emulated device");
    return true;
}

tlm_emu_graph *tlm_emu_graph_new(void) { return calloc(1, sizeof(tlm_emu_graph)); }

void tlm_emu_graph_free(tlm_emu_graph *g) {
    if (!g) return;
    free(g->records);
    free(g->args);
    free(g);
}

static record *add_record(tlm_emu_graph *g, record_kind kind, tlm_err *err) {
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 64;
        record *grown = realloc(g->records, cap * sizeof *grown);
        if (!grown) {
            tlm_fail(err, "out of memory recording a CUDA graph");
            return NULL;
        }
        g->records = grown;
        g->cap = cap;
    }
    record *r = &g->records[g->n++];
    memset(r, 0, sizeof *r);
    r->kind = kind;
    return r;
}

static bool reserve_args(tlm_emu_graph *g, size_t bytes, tlm_err *err) {
    if (g->args_used + bytes <= g->args_cap) return true;
    size_t cap = g->args_cap ? 2 * g->args_cap : 4096;
    while (cap < g->args_used + bytes) cap *= 2;
    unsigned char *grown = realloc(g->args, cap);
    if (!grown) return tlm_fail(err, "out of memory recording a CUDA graph's arguments");
    g->args = grown;
    g->args_cap = cap;
    return true;
}

bool tlm_emu_graph_launch(tlm_emu_graph *g, const tlm_emu_kernel *k, const char *name, tlm_launch dims, void **args,
                          tlm_err *err) {
    if (k->nargs > MAX_ARGS) return tlm_fail(err, "kernel %s: more than %d parameters to record", name, MAX_ARGS);
    size_t bytes = 0;
    for (int i = 0; i < k->nargs; i++) bytes += align_up(k->sizes[i]);
    if (!reserve_args(g, bytes, err)) return false;
    record *r = add_record(g, RECORD_LAUNCH, err);
    if (!r) return false;
    r->kernel = k;
    r->dims = dims;
    r->args_at = g->args_used;
    snprintf(r->name, sizeof r->name, "%s", name);
    for (int i = 0; i < k->nargs; i++) {
        memcpy(g->args + g->args_used, args[i], k->sizes[i]);
        g->args_used += align_up(k->sizes[i]);
    }
    return true;
}

bool tlm_emu_graph_gemm(tlm_emu_graph *g, const tlm_gemm *gemm, tlm_err *err) {
    record *r = add_record(g, RECORD_GEMM, err);
    if (r) r->gemm = *gemm;
    return r != NULL;
}

bool tlm_emu_graph_copy(tlm_emu_graph *g, tlm_dptr dst, tlm_dptr src, size_t bytes, tlm_err *err) {
    record *r = add_record(g, RECORD_COPY, err);
    if (r) r->dst = dst, r->src = src, r->bytes = bytes;
    return r != NULL;
}

bool tlm_emu_graph_zero(tlm_emu_graph *g, tlm_dptr dst, size_t bytes, tlm_err *err) {
    record *r = add_record(g, RECORD_ZERO, err);
    if (r) r->dst = dst, r->bytes = bytes;
    return r != NULL;
}

static bool run_record(const tlm_emu_graph *g, const record *r, tlm_err *err) {
    switch (r->kind) {
    case RECORD_LAUNCH: {
        void *args[MAX_ARGS];
        size_t at = r->args_at;
        for (int i = 0; i < r->kernel->nargs; i++) {
            args[i] = g->args + at;
            at += align_up(r->kernel->sizes[i]);
        }
        return tlm_emu_run_launch(r->kernel, r->name, r->dims, args, err);
    }
    case RECORD_GEMM: tlm_gemm_reference(&r->gemm); return true;
    case RECORD_COPY: memmove((void *)(uintptr_t)r->dst, (const void *)(uintptr_t)r->src, r->bytes); return true;
    case RECORD_ZERO: memset((void *)(uintptr_t)r->dst, 0, r->bytes); return true;
    }
    return tlm_fail(err, "a CUDA graph record of unknown kind %d", (int)r->kind);
}

bool tlm_emu_graph_run(const tlm_emu_graph *g, tlm_err *err) {
    for (size_t i = 0; i < g->n; i++)
        if (!run_record(g, &g->records[i], err)) return false;
    return true;
}
