/* From the compiler's IR to the model.so descriptor's tables: the records
 * the IR does not hold already (settings, layers) are filled in here, the
 * training defaults are the checked model's own record, and abi/ writes the
 * blob (model_so_write.c). */
#include "blob.h"

#include <stdlib.h>
#include <string.h>

#include "model_so.h"
#include "xalloc.h"

static tlm_abi_config config_record(const ir_model *ir) {
    const checked_model *m = ir->m;
    tlm_abi_config am = {0};
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
    for (int i = 0; i < m->ncms && i < (int)(sizeof am.cms / sizeof am.cms[0]); i++) am.cms[i] = m->cms[i];
    am.norm_eps = m->norm_eps;
    am.rope_base = m->rope_base;
    am.inner_lr = m->inner_lr;
    am.param_floats = ir->param_floats;
    if (m->tokenizer) memcpy(am.tokenizer_hash, m->tokenizer_hash, sizeof am.tokenizer_hash);
    return am;
}

uint8_t *blob_write(const ir_model *ir, const char *cpu_needs, size_t *size) {
    const checked_model *m = ir->m;
    tlm_abi_config config = config_record(ir);
    tlm_abi_layer *layers = tlm_xcalloc((size_t)m->layers + 1, sizeof *layers);
    for (int64_t l = 0; l < m->layers; l++)
        layers[l] = (tlm_abi_layer){m->widths[l], m->raw_widths[l], (uint32_t)ir->layer_kernel[l], 0};
    tlm_abi_plan plans[TLM_PLAN_COUNT] = {[TLM_PLAN_TRAIN] = ir->train.head, [TLM_PLAN_INFER] = ir->infer.head};
    tlm_abi_train train = m->train;
    if (m->min_lr_default) train.min_lr = -1; /* a tenth of lr as tlm-run's flags leave it */
    tlm_so_tables tables = {
        .config = &config,
        .train = &train,
        .layers = layers,
        .params = ir->params,
        .kernels = ir->kernels,
        .buffers = ir->buffers,
        .ops = ir->ops,
        .plans = plans,
        .nlayers = (uint32_t)m->layers,
        .nparams = (uint32_t)ir->nparams,
        .nkernels = (uint32_t)ir->nkernels,
        .nbuffers = (uint32_t)ir->nbuffers,
        .nops = (uint32_t)ir->nops,
        .plan_offsets = {[TLM_PLAN_TRAIN] = ir->train.offsets, [TLM_PLAN_INFER] = ir->infer.offsets},
        .model_name = m->name,
        .tokenizer_path = m->tokenizer,
        .cpu_needs = cpu_needs,
        .param_names = ir->param_names,
        .kernel_symbols = (const char *const *)ir->kernel_symbols,
        .kernel_impl_whys = ir->kernel_impl_whys,
        .buffer_names = ir->buffer_names,
    };
    uint8_t *blob = tlm_blob_write(&tables, size);
    free(layers);
    if (!blob) tlm_out_of_memory();
    return blob;
}

bool emit_ir(FILE *out, const checked_model *m, int cpu_mlp) {
    ir_model ir;
    if (!ir_lower(m, cpu_mlp, &ir)) {
        fprintf(stderr, "tlmc: %s: the memory plan does not fit in memory\n", m->name);
        ir_free(&ir);
        return false;
    }
    size_t size;
    uint8_t *blob = blob_write(&ir, NULL, &size);
    ir_free(&ir);
    /* Printed from the blob through the runtime's own reader, so the text
     * shows what tlm-run will execute, validated as tlm-run validates it. */
    tlm_so_tables tables;
    tlm_err why = {""};
    bool ok = tlm_blob_read(blob, size, &tables, &why);
    if (!ok) fprintf(stderr, "tlmc: %s: internal error: the descriptor is invalid: %s\n", m->name, why.msg);
    else {
        fprintf(out, "; tlm IR, ABI version %u\n", TLM_ABI_VERSION);
        if (!tlm_so_print_all(out, &tables)) tlm_out_of_memory();
    }
    tlm_so_tables_free(&tables);
    free(blob);
    return ok;
}
