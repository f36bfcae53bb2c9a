#include "blob.h"

#include <stdlib.h>
#include <string.h>

#include "abi_checksum.h"
#include "vocabulary.h"

typedef struct writer {
    uint8_t *data;
    size_t size, cap;
    char *strings;             /* the string table, built alongside */
    size_t ssize, scap;
} writer;

static void reserve(uint8_t **p, size_t *cap, size_t need) {
    if (need <= *cap) return;
    size_t c = *cap ? *cap : 4096;
    while (c < need) c *= 2;
    uint8_t *q = realloc(*p, c);
    if (!q) { fputs("out of memory\n", stderr); exit(3); }
    memset(q + *cap, 0, c - *cap);
    *p = q;
    *cap = c;
}

/* Appends n bytes at a 16-byte boundary; returns their offset. */
static uint64_t put(writer *w, const void *src, size_t n) {
    size_t at = (w->size + 15) & ~(size_t)15;
    reserve(&w->data, &w->cap, at + n);
    memcpy(w->data + at, src, n);
    w->size = at + n;
    return at;
}

static uint32_t str(writer *w, const char *s) {
    size_t n = strlen(s) + 1;
    reserve((uint8_t **)&w->strings, &w->scap, w->ssize + n);
    memcpy(w->strings + w->ssize, s, n);
    uint32_t at = (uint32_t)w->ssize;
    w->ssize += n;
    return at;
}

uint8_t *blob_write(const ir_model *ir, size_t *size) {
    const checked_model *m = ir->m;
    writer w = {0};
    tlm_blob_header h = {0};
    put(&w, &h, sizeof h);                     /* filled in at the end */
    str(&w, "");                               /* offset 0 is the empty string */

    tlm_abi_config am = {0};
    am.name = str(&w, m->name);
    am.mixer = (uint32_t)m->mixer;
    am.mlp = (uint32_t)m->mlp;
    am.gate = (uint32_t)m->gate;
    am.tie_embeddings = m->tie_embeddings;
    am.ncms = (uint32_t)m->ncms;
    am.vocab = m->vocab;
    am.context = m->context;
    am.d_model = m->d_model;
    am.layers = m->layers;
    am.heads = m->heads;
    am.head_dim = m->head_dim;
    am.quantum = m->quantum;
    am.chunk = m->chunk;
    am.budget_width = m->has_budget ? m->budget_width : 0;
    for (int i = 0; i < m->ncms && i < 8; i++) am.cms[i] = m->cms[i];
    am.norm_eps = m->norm_eps;
    am.rope_base = m->rope_base;
    am.inner_lr = m->inner_lr;
    am.param_floats = ir->param_floats;
    h.model_off = put(&w, &am, sizeof am);

    h.train_off = put(&w, &m->train, sizeof m->train);

    tlm_abi_layer *layers = calloc((size_t)m->layers, sizeof *layers);
    for (int64_t l = 0; l < m->layers; l++)
        layers[l] = (tlm_abi_layer){m->widths[l], m->raw_widths[l], (uint32_t)ir->layer_kernel[l], 0};
    h.layers_off = put(&w, layers, (size_t)m->layers * sizeof *layers);
    free(layers);

    tlm_abi_param *params = malloc((size_t)ir->nparams * sizeof *params + 1);
    for (int i = 0; i < ir->nparams; i++) {
        params[i] = ir->params[i];
        params[i].name = str(&w, ir->param_names[i]);
    }
    h.params_off = put(&w, params, (size_t)ir->nparams * sizeof *params);
    free(params);

    tlm_abi_kernel *kernels = malloc((size_t)ir->nkernels * sizeof *kernels + 1);
    for (int i = 0; i < ir->nkernels; i++) {
        kernels[i] = ir->kernels[i];
        kernels[i].symbol = str(&w, ir->kernel_symbols[i]);
    }
    h.kernels_off = put(&w, kernels, (size_t)ir->nkernels * sizeof *kernels);
    free(kernels);

    tlm_abi_buffer *buffers = malloc((size_t)ir->nbuffers * sizeof *buffers + 1);
    for (int i = 0; i < ir->nbuffers; i++) {
        buffers[i] = ir->buffers[i];
        buffers[i].name = str(&w, ir->buffer_names[i]);
    }
    h.buffers_off = put(&w, buffers, (size_t)ir->nbuffers * sizeof *buffers);
    free(buffers);

    h.ops_off = put(&w, ir->ops, (size_t)ir->nops * sizeof *ir->ops);

    tlm_abi_plan plans[2] = {ir->train.head, ir->infer.head};
    plans[0].offsets_off = put(&w, ir->train.offsets, (size_t)ir->nbuffers * sizeof(int64_t));
    plans[1].offsets_off = put(&w, ir->infer.offsets, (size_t)ir->nbuffers * sizeof(int64_t));
    h.plans_off = put(&w, plans, sizeof plans);

    h.strings_off = put(&w, w.strings, w.ssize);
    h.strings_size = w.ssize;
    free(w.strings);

    w.size = (w.size + 15) & ~(size_t)15;
    reserve(&w.data, &w.cap, w.size);
    h.magic = TLM_ABI_MAGIC;
    h.version = TLM_ABI_VERSION;
    h.size = w.size;
    h.nlayers = (uint32_t)m->layers;
    h.nparams = (uint32_t)ir->nparams;
    h.nkernels = (uint32_t)ir->nkernels;
    h.nbuffers = (uint32_t)ir->nbuffers;
    h.nops = (uint32_t)ir->nops;
    h.nplans = 2;
    h.checksum = tlm_abi_checksum(w.data + sizeof h, w.size - sizeof h);
    memcpy(w.data, &h, sizeof h);
    *size = w.size;
    return w.data;
}
