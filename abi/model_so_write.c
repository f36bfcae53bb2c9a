/* Writing the model.so descriptor: the tables in the order tlm_blob_header
 * lists them, each at a 16-byte boundary, names gathered into one string
 * table, the checksum over everything after the header. The reader
 * (model_so.c) undoes exactly this. */
#include "model_so.h"

#include <stdlib.h>
#include <string.h>

#include "abi_checksum.h"

enum { TABLE_ALIGN = 16 };   /* every table starts here, so the reader may cast in place */

typedef struct writer {
    uint8_t *data;
    size_t size, cap;
    char *strings;             /* the string table, built alongside */
    size_t ssize, scap;
    bool out_of_memory;        /* sticky: later calls do nothing */
} writer;

static bool reserve(writer *w, uint8_t **p, size_t *cap, size_t need) {
    if (w->out_of_memory) return false;
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 4096;
    while (c < need) c *= 2;
    uint8_t *q = realloc(*p, c);
    if (!q) {
        w->out_of_memory = true;
        return false;
    }
    memset(q + *cap, 0, c - *cap);   /* padding between tables is zero, so the checksum is reproducible */
    *p = q;
    *cap = c;
    return true;
}

static size_t aligned(size_t n) { return (n + TABLE_ALIGN - 1) & ~(size_t)(TABLE_ALIGN - 1); }

/* Appends n bytes at an aligned offset; returns that offset. */
static uint64_t put(writer *w, const void *src, size_t n) {
    size_t at = aligned(w->size);
    if (!reserve(w, &w->data, &w->cap, at + n)) return 0;
    if (n) memcpy(w->data + at, src, n);
    w->size = at + n;
    return at;
}

static uint32_t str(writer *w, const char *s) {
    size_t n = strlen(s) + 1;
    if (!reserve(w, (uint8_t **)&w->strings, &w->scap, w->ssize + n)) return 0;
    memcpy(w->strings + w->ssize, s, n);
    uint32_t at = (uint32_t)w->ssize;
    w->ssize += n;
    return at;
}

/* A copy of a table with each record's name replaced by its string-table
 * offset; NULL (and w marked) when out of memory. */
static void *named_copy(writer *w, const void *records, size_t count, size_t record_size, size_t name_at,
                        const char *const *names) {
    uint8_t *copy = malloc(count * record_size + 1);
    if (!copy) {
        w->out_of_memory = true;
        return NULL;
    }
    if (count) memcpy(copy, records, count * record_size);
    for (size_t i = 0; i < count; i++) {
        uint32_t name = str(w, names[i]);
        memcpy(copy + i * record_size + name_at, &name, sizeof name);
    }
    return copy;
}

static uint64_t put_named(writer *w, const void *records, size_t count, size_t record_size, size_t name_at,
                          const char *const *names) {
    void *copy = named_copy(w, records, count, record_size, name_at, names);
    if (!copy) return 0;
    uint64_t at = put(w, copy, count * record_size);
    free(copy);
    return at;
}

/* The kernels name two strings: the fwd entry's symbol, and why the CPU
 * runs the implementation it does. */
static uint64_t put_kernels(writer *w, const tlm_so_tables *t) {
    tlm_abi_kernel *copy =
        named_copy(w, t->kernels, t->nkernels, sizeof *t->kernels, offsetof(tlm_abi_kernel, symbol), t->kernel_symbols);
    if (!copy) return 0;
    for (uint32_t i = 0; i < t->nkernels; i++) copy[i].cpu_impl_why = str(w, t->kernel_impl_whys[i]);
    uint64_t at = put(w, copy, t->nkernels * sizeof *copy);
    free(copy);
    return at;
}

uint8_t *tlm_blob_write(const tlm_so_tables *t, size_t *size) {
    writer w = {0};
    tlm_blob_header h = {0};
    put(&w, &h, sizeof h);                     /* filled in at the end */
    str(&w, "");                               /* offset 0 is the empty string */

    tlm_abi_config config = *t->config;
    config.name = str(&w, t->model_name);
    config.tokenizer = t->tokenizer_path ? str(&w, t->tokenizer_path) : 0;
    config.cpu_needs = t->cpu_needs ? str(&w, t->cpu_needs) : 0;
    h.model_off = put(&w, &config, sizeof config);
    h.train_off = put(&w, t->train, sizeof *t->train);
    h.layers_off = put(&w, t->layers, (size_t)t->nlayers * sizeof *t->layers);
    h.params_off =
        put_named(&w, t->params, t->nparams, sizeof *t->params, offsetof(tlm_abi_param, name), t->param_names);
    h.kernels_off = put_kernels(&w, t);
    h.buffers_off =
        put_named(&w, t->buffers, t->nbuffers, sizeof *t->buffers, offsetof(tlm_abi_buffer, name), t->buffer_names);
    h.ops_off = put(&w, t->ops, (size_t)t->nops * sizeof *t->ops);

    tlm_abi_plan plans[TLM_PLAN_COUNT];
    for (int i = 0; i < TLM_PLAN_COUNT; i++) {
        plans[i] = t->plans[i];
        plans[i].offsets_off = put(&w, t->plan_offsets[i], (size_t)t->nbuffers * sizeof(int64_t));
    }
    h.plans_off = put(&w, plans, sizeof plans);

    h.strings_off = put(&w, w.strings, w.ssize);
    h.strings_size = w.ssize;
    free(w.strings);

    w.size = aligned(w.size);                  /* the blob's length is a multiple of the alignment too */
    if (!reserve(&w, &w.data, &w.cap, w.size)) {
        free(w.data);
        return NULL;
    }
    h.magic = TLM_ABI_MAGIC;
    h.version = TLM_ABI_VERSION;
    h.size = w.size;
    h.nlayers = t->nlayers;
    h.nparams = t->nparams;
    h.nkernels = t->nkernels;
    h.nbuffers = t->nbuffers;
    h.nops = t->nops;
    h.nplans = TLM_PLAN_COUNT;
    h.checksum = tlm_abi_checksum(w.data + sizeof h, w.size - sizeof h);
    memcpy(w.data, &h, sizeof h);
    *size = w.size;
    return w.data;
}
