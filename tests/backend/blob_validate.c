/* The validator against damaged descriptors: for each compiled model given,
 * the blob as tlmc wrote it passes, and every field the executor later
 * follows, set out of range one at a time (the checksum fixed, so only the
 * validator stands between it and the executor), is refused with a message
 * that says what is wrong.
 *
 *   blob_validate MODEL.so...
 *
 * The models should include a SwiGLU model whose layers differ in width and
 * a GELU Titans model (MLPs without a gate, linear ops over three
 * parameters); cases a model cannot exercise are skipped for it, and each
 * case must run on at least one model. */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi_checksum.h"
#include "arena_plan.h"
#include "model_so.h"

/* A writable copy of one blob, with its tables located. */
typedef struct blob {
    uint8_t *bytes;
    size_t size;
    tlm_blob_header *h;
    tlm_abi_config *config;
    tlm_abi_train *train;
    tlm_abi_layer *layers;
    tlm_abi_param *params;
    tlm_abi_kernel *kernels;
    tlm_abi_buffer *buffers;
    tlm_abi_op *ops;
    tlm_abi_plan *plans;
} blob;

static void locate(blob *b) {
    b->h = (tlm_blob_header *)b->bytes;
    b->config = (tlm_abi_config *)(b->bytes + b->h->model_off);
    b->train = (tlm_abi_train *)(b->bytes + b->h->train_off);
    b->layers = (tlm_abi_layer *)(b->bytes + b->h->layers_off);
    b->params = (tlm_abi_param *)(b->bytes + b->h->params_off);
    b->kernels = (tlm_abi_kernel *)(b->bytes + b->h->kernels_off);
    b->buffers = (tlm_abi_buffer *)(b->bytes + b->h->buffers_off);
    b->ops = (tlm_abi_op *)(b->bytes + b->h->ops_off);
    b->plans = (tlm_abi_plan *)(b->bytes + b->h->plans_off);
}

static int64_t *plan_offsets(blob *b, int plan) { return (int64_t *)(b->bytes + b->plans[plan].offsets_off); }

static void fix_checksum(blob *b) {
    b->h->checksum = tlm_abi_checksum(b->bytes + sizeof *b->h, b->size - sizeof *b->h);
}

/* The first op of a kind (of layer `layer`, or any when -2), or NULL. */
static tlm_abi_op *find_op(blob *b, uint32_t kind, int layer) {
    for (uint32_t i = 0; i < b->h->nops; i++)
        if (b->ops[i].kind == kind && (layer == -2 || b->ops[i].layer == layer)) return &b->ops[i];
    return NULL;
}

/* ---- the damage, one field each; false: this model has no such field ---- */

static bool nplans_one(blob *b) {
    b->h->nplans = 1;
    return true;
}
static bool plan_kinds_swapped(blob *b) {
    b->plans[TLM_PLAN_TRAIN].kind = TLM_PLAN_INFER;
    b->plans[TLM_PLAN_INFER].kind = TLM_PLAN_TRAIN;
    return true;
}
static bool train_plan_short(blob *b) {
    b->plans[TLM_PLAN_TRAIN].nops = b->h->nops - 1;
    return true;
}
static bool train_plan_long(blob *b) {
    b->plans[TLM_PLAN_TRAIN].nops = b->h->nops + 1;
    return true;
}
static bool infer_plan_long(blob *b) {
    b->plans[TLM_PLAN_INFER].nops = b->h->nops + 1;
    return true;
}
static bool infer_plan_empty(blob *b) {
    b->plans[TLM_PLAN_INFER].nops = 0;
    return true;
}
static bool plan_batch_zero(blob *b) {
    b->plans[TLM_PLAN_INFER].batch = 0;
    return true;
}

static bool op_kind(blob *b) {
    b->ops[1].kind = TLM_OP_COUNT;
    return true;
}
static bool op_layer_past(blob *b) {
    tlm_abi_op *op = find_op(b, TLM_OP_RMSNORM, 0);
    if (!op) return false;
    op->layer = (int32_t)b->h->nlayers;
    return true;
}
static bool op_layer_negative(blob *b) {
    tlm_abi_op *op = find_op(b, TLM_OP_RMSNORM, 0);
    if (!op) return false;
    op->layer = -2;
    return true;
}
static bool op_flags(blob *b) {
    b->ops[0].flags = 2;
    return true;
}
static bool op_input_past(blob *b) {
    tlm_abi_op *op = find_op(b, TLM_OP_RMSNORM, 0);
    if (!op) return false;
    op->rmsnorm.in_x = (int32_t)b->h->nbuffers;
    return true;
}
static bool op_output_negative(blob *b) {
    tlm_abi_op *op = find_op(b, TLM_OP_RMSNORM, 0);
    if (!op) return false;
    op->rmsnorm.out_rstd = -2;
    return true;
}
static bool op_param_past(blob *b) {
    tlm_abi_op *op = find_op(b, TLM_OP_EMBED, -1);
    if (!op) return false;
    op->embed.param_embed = (int32_t)b->h->nparams;
    return true;
}
static bool op_operand_absent(blob *b) {
    tlm_abi_op *op = find_op(b, TLM_OP_OUT_PROJ, 0);
    if (!op) return false;
    op->out_proj.in_resid = -1;
    return true;
}
static bool op_unused_slot_filled(blob *b) {
    tlm_abi_op *op = find_op(b, TLM_OP_EMBED, -1);
    if (!op) return false;
    op->in[0] = 0;                             /* embed reads the tokens, no buffer */
    return true;
}
static bool mlp_kernel_past(blob *b) {
    tlm_abi_op *op = find_op(b, TLM_OP_MLP, -2);
    if (!op) return false;
    op->kernel = (int32_t)b->h->nkernels;
    return true;
}
static bool mlp_kernel_absent(blob *b) {
    tlm_abi_op *op = find_op(b, TLM_OP_MLP_BACKWARD, -2);
    if (!op) return false;
    op->kernel = -1;
    return true;
}
static bool mlp_kernel_other_width(blob *b) {
    tlm_abi_op *op = find_op(b, TLM_OP_MLP, 0);
    if (!op || b->h->nlayers < 2 || b->layers[1].width == b->layers[0].width) return false;
    op->kernel = (int32_t)b->layers[1].kernel;
    return true;
}
static bool mlp_without_layer(blob *b) {
    tlm_abi_op *op = find_op(b, TLM_OP_MLP, -2);
    if (!op) return false;
    op->layer = -1;
    return true;
}
static bool kernel_on_other_op(blob *b) {
    tlm_abi_op *op = find_op(b, TLM_OP_RMSNORM, 0);
    if (!op) return false;
    op->kernel = 0;
    return true;
}
static bool swiglu_gate_absent(blob *b) {
    tlm_abi_op *op = find_op(b, TLM_OP_MLP, -2);
    if (!op || b->config->mlp != TLM_MLP_SWIGLU) return false;
    op->mlp.param_w_gate = -1;
    return true;
}
static bool swiglu_gate_buffer_absent(blob *b) {
    tlm_abi_op *op = find_op(b, TLM_OP_MLP_BACKWARD, -2);
    if (!op || b->config->mlp != TLM_MLP_SWIGLU) return false;
    op->mlp_backward.out_d_pre_gate = -1;
    return true;
}
static bool gelu_gate_present(blob *b) {
    tlm_abi_op *op = find_op(b, TLM_OP_MLP, -2);
    if (!op || b->config->mlp != TLM_MLP_GELU) return false;
    op->mlp.out_pre_gate = op->mlp.out_pre_up;
    return true;
}
static bool qkv_not_one_matrix(blob *b) {
    tlm_abi_op *op = find_op(b, TLM_OP_QKV, -2);
    if (!op) return false;
    op->qkv.param_wk = op->qkv.param_wq;
    return true;
}
static bool qkv_backward_not_one_matrix(blob *b) {
    tlm_abi_op *op = find_op(b, TLM_OP_QKV_BACKWARD, -2);
    if (!op) return false;
    int32_t wk = op->qkv_backward.param_wk;
    op->qkv_backward.param_wk = op->qkv_backward.param_wv;
    op->qkv_backward.param_wv = wk;
    return true;
}
static tlm_abi_op *three_row_linear(blob *b, uint32_t kind) {
    for (uint32_t i = 0; i < b->h->nops; i++)
        if (b->ops[i].kind == kind && b->ops[i].linear.param_w2 >= 0) return &b->ops[i];
    return NULL;
}
static bool linear_rows_swapped(blob *b) {
    tlm_abi_op *op = three_row_linear(b, TLM_OP_LINEAR);
    if (!op) return false;
    int32_t w1 = op->linear.param_w1;
    op->linear.param_w1 = op->linear.param_w2;
    op->linear.param_w2 = w1;
    return true;
}
static bool linear_dw_gap(blob *b) {
    tlm_abi_op *op = three_row_linear(b, TLM_OP_LINEAR_DW);
    if (!op) return false;
    op->linear_dw.param_w1 = -1;
    return true;
}
static bool linear_dx_without_w0(blob *b) {
    tlm_abi_op *op = three_row_linear(b, TLM_OP_LINEAR_DX);
    if (!op) return false;
    op->linear_dx.param_w0 = -1;
    return true;
}

/* The largest buffer a plan places. */
static int largest_placed(blob *b, int plan) {
    const int64_t *off = plan_offsets(b, plan);
    const tlm_abi_plan *p = &b->plans[plan];
    int best = -1;
    int64_t best_bytes = 0;
    for (uint32_t i = 0; i < b->h->nbuffers; i++) {
        int64_t bytes = tlm_buffer_bytes(&b->buffers[i], p->batch, p->seq);
        if (off[i] >= 0 && bytes > best_bytes) {
            best = (int)i;
            best_bytes = bytes;
        }
    }
    return best;
}
static bool plan_drops_buffer(blob *b) {
    plan_offsets(b, TLM_PLAN_TRAIN)[b->ops[0].embed.out_resid] = -1;
    return true;
}
static bool plan_buffer_past_arena(blob *b) {
    int i = largest_placed(b, TLM_PLAN_INFER);
    plan_offsets(b, TLM_PLAN_INFER)[i] = b->plans[TLM_PLAN_INFER].arena_bytes - TLM_ARENA_ALIGN;
    return true;
}
static bool plan_arena_small(blob *b) {
    b->plans[TLM_PLAN_TRAIN].arena_bytes /= 2;
    return true;
}
static bool plan_offset_misaligned(blob *b) {
    int i = largest_placed(b, TLM_PLAN_TRAIN);
    plan_offsets(b, TLM_PLAN_TRAIN)[i] += 4;
    return true;
}
static bool plan_bigger_batch(blob *b) {
    b->plans[TLM_PLAN_INFER].batch *= 64;    /* the offsets were made for one sequence */
    return true;
}
static bool param_past_block(blob *b) {
    tlm_abi_param *p = &b->params[b->h->nparams - 1];
    p->offset = b->config->param_floats - p->count + 1;
    return true;
}
static bool param_name_past_strings(blob *b) {
    b->params[0].name = (uint32_t)b->h->strings_size;
    return true;
}
static bool kernel_mlp(blob *b) {
    b->kernels[0].mlp = TLM_MLP_COUNT;
    return true;
}
/* a symbol that is not a fwd entry's: the GPU derives its kernels' names
 * from the stem before "_fwd" */
static bool kernel_symbol_not_fwd(blob *b) {
    b->kernels[0].symbol = b->params[0].name;
    return true;
}
static bool kernel_width(blob *b) {
    b->kernels[0].width += 8;
    return true;
}
static bool layer_kernel(blob *b) {
    b->layers[0].kernel = b->h->nkernels;
    return true;
}
static bool config_mixer(blob *b) {
    b->config->mixer = TLM_MIXER_COUNT;
    return true;
}
static bool config_mlp(blob *b) {
    b->config->mlp = TLM_MLP_COUNT;
    return true;
}
static bool config_gate(blob *b) {
    b->config->gate = TLM_GATE_COUNT;
    return true;
}
static bool config_ncms(blob *b) {
    b->config->ncms = 9;
    return true;
}
static bool config_heads_huge(blob *b) {
    b->config->heads = (int64_t)1 << 40;       /* heads × head_dim overflows */
    b->config->head_dim = (int64_t)1 << 40;
    return true;
}
static bool train_optimizer(blob *b) {
    b->train->optimizer = TLM_OPT_COUNT;
    return true;
}
static bool train_schedule(blob *b) {
    b->train->lr_schedule = TLM_LR_COUNT;
    return true;
}
/* Sizes the executor computes from the config: a smaller operand would let
 * it run past its slot. */
static bool accumulate_on_qkv_backward(blob *b) {
    tlm_abi_op *op = find_op(b, TLM_OP_QKV_BACKWARD, -2);
    if (!op) return false;
    op->flags = TLM_OP_FLAG_ACCUMULATE;
    return true;
}
static bool qkv_buffer_small(blob *b) {
    tlm_abi_op *op = find_op(b, TLM_OP_QKV, 0);
    if (!op) return false;
    b->buffers[op->qkv.out_qkv].per_token -= 1;
    return true;
}
static bool lse_buffer_small(blob *b) {
    tlm_abi_op *op = find_op(b, TLM_OP_ATTENTION, 0);
    if (!op) return false;
    b->buffers[op->attention.out_lse].per_token -= 1;
    return true;
}
static bool mlp_output_is_rstd(blob *b) {
    tlm_abi_op *op = find_op(b, TLM_OP_MLP, 0), *norm = find_op(b, TLM_OP_RMSNORM, 0);
    if (!op || !norm) return false;
    op->mlp.out_out = norm->rmsnorm.out_rstd;  /* [BT] where [BT, D] is written */
    return true;
}
static bool down_proj_transposed(blob *b) {
    tlm_abi_op *op = find_op(b, TLM_OP_MLP, 0);
    if (!op) return false;
    tlm_abi_param *p = &b->params[op->mlp.param_w_down];
    if (p->shape[0] == p->shape[1]) return false;
    int64_t rows = p->shape[0];
    p->shape[0] = p->shape[1];
    p->shape[1] = rows;
    return true;
}
static bool linear_input_small(blob *b) {
    tlm_abi_op *op = find_op(b, TLM_OP_LINEAR, -2);
    if (!op) return false;
    b->buffers[op->linear.in_x].per_token = b->params[op->linear.param_w0].shape[1] - 1;
    return true;
}

/* A placed buffer no op of the plan uses still lies inside its arena. */
static bool plan_unused_buffer_past_arena(blob *b) {
    int64_t *off = plan_offsets(b, TLM_PLAN_INFER);
    for (uint32_t i = 0; i < b->h->nbuffers; i++) {
        if (off[i] < 0 && tlm_buffer_bytes(&b->buffers[i], b->plans[TLM_PLAN_INFER].batch,
                                           b->plans[TLM_PLAN_INFER].seq) > TLM_ARENA_ALIGN) {
            off[i] = b->plans[TLM_PLAN_INFER].arena_bytes - TLM_ARENA_ALIGN;
            return true;
        }
    }
    return false;
}
/* The buffers the runtime finds by role (the first of a role and layer). */
static int find_buffer(blob *b, uint32_t role, int32_t layer) {
    for (uint32_t i = 0; i < b->h->nbuffers; i++)
        if (b->buffers[i].role == role && b->buffers[i].layer == layer) return (int)i;
    return -1;
}
static bool logits_missing(blob *b) {
    int i = find_buffer(b, TLM_B_LOGITS, -1);
    if (i < 0) return false;
    b->buffers[i].role = TLM_B_LSE;
    return true;
}
static bool logits_small(blob *b) {
    if (b->buffers[0].per_token >= b->config->vocab) return false;
    b->buffers[0].role = TLM_B_LOGITS;         /* found before the real one */
    b->buffers[0].layer = -1;
    return true;
}
static bool logits_backward_only(blob *b) {
    int logits = find_buffer(b, TLM_B_LOGITS, -1);
    if (logits < 0) return false;
    for (uint32_t i = 0; i < b->h->nbuffers; i++) {
        tlm_abi_buffer *x = &b->buffers[i];
        if (x->role == TLM_B_D_PRE_UP && x->per_token >= b->config->vocab) {
            b->buffers[logits].role = TLM_B_LSE;
            x->role = TLM_B_LOGITS;
            x->layer = -1;
            return true;
        }
    }
    return false;
}
static bool mid_missing(blob *b) {
    int i = find_buffer(b, TLM_B_MID, 1);
    if (i < 0) return false;
    b->buffers[i].role = TLM_B_NORM2;
    return true;
}
static bool resid_small(blob *b) {
    int rstd = find_buffer(b, TLM_B_RSTD1, 0), resid = find_buffer(b, TLM_B_RESID, 1);
    if (rstd < 0 || resid < 0 || rstd > resid) return false;
    b->buffers[rstd].role = TLM_B_RESID;       /* found before the real one */
    b->buffers[rstd].layer = 1;
    return true;
}

typedef struct damage {
    const char *what;
    const char *message;      /* a part of the validator's message */
    bool (*apply)(blob *);
    int refused;              /* on how many models */
} damage;

static damage cases[] = {
    {"two plans, not one", "memory plans", nplans_one, 0},
    {"plans at their kinds' indices", "memory plan 0 is invalid", plan_kinds_swapped, 0},
    {"training plan covers every op (fewer)", "training plan covers", train_plan_short, 0},
    {"training plan covers every op (more)", "training plan covers", train_plan_long, 0},
    {"inference plan within the ops", "inference plan covers", infer_plan_long, 0},
    {"inference plan not empty", "inference plan covers", infer_plan_empty, 0},
    {"plan batch at least 1", "memory plan 1 is invalid", plan_batch_zero, 0},
    {"op kind known", "unknown kind", op_kind, 0},
    {"op layer below the count", "names layer", op_layer_past, 0},
    {"op layer at least -1", "names layer", op_layer_negative, 0},
    {"op flags known", "unknown flags", op_flags, 0},
    {"op input in range", "input x is", op_input_past, 0},
    {"op output in range", "output rstd is -2, out of range", op_output_negative, 0},
    {"op parameter in range", "parameter embed is", op_param_past, 0},
    {"named operand present", "lacks its operand resid", op_operand_absent, 0},
    {"unused slot empty", "fills input slot 0, which its kind does not use", op_unused_slot_filled, 0},
    {"MLP kernel in range", "names kernel", mlp_kernel_past, 0},
    {"MLP backward has a kernel", "names kernel", mlp_kernel_absent, 0},
    {"MLP kernel of its layer's width", "another width", mlp_kernel_other_width, 0},
    {"MLP op in a layer", "belongs to no layer", mlp_without_layer, 0},
    {"only MLPs name a kernel", "is not an MLP", kernel_on_other_op, 0},
    {"SwiGLU MLP has its gate weight", "lacks its operand w_gate", swiglu_gate_absent, 0},
    {"SwiGLU MLP backward has its gate gradient", "lacks its operand d_pre_gate", swiglu_gate_buffer_absent, 0},
    {"GELU MLP has no gate", "GELU MLP has a gate operand pre_gate", gelu_gate_present, 0},
    {"qkv reads one matrix", "not one matrix", qkv_not_one_matrix, 0},
    {"qkv_backward reads one matrix (rows in order)", "not one matrix", qkv_backward_not_one_matrix, 0},
    {"linear reads one matrix (rows in order)", "not one matrix", linear_rows_swapped, 0},
    {"linear_dw has no gap in its rows", "w2 without w1", linear_dw_gap, 0},
    {"linear_dx has its first rows", "lacks its operand w0", linear_dx_without_w0, 0},
    {"plan places every buffer its ops use", "does not place buffer", plan_drops_buffer, 0},
    {"plan keeps a buffer inside the arena", "outside its arena", plan_buffer_past_arena, 0},
    {"arena holds the plan", "outside its arena", plan_arena_small, 0},
    {"offsets aligned", "misaligned", plan_offset_misaligned, 0},
    {"plan's sizes are the ones its offsets were made for", "outside its arena", plan_bigger_batch, 0},
    {"parameter inside the block", "outside the parameter block", param_past_block, 0},
    {"parameter name inside the strings", "parameter 0 is invalid", param_name_past_strings, 0},
    {"kernel MLP kind known", "kernel 0 is invalid", kernel_mlp, 0},
    {"kernel symbol names a fwd entry", "kernel 0 is invalid", kernel_symbol_not_fwd, 0},
    {"kernel width matches its layers", "layer 0 is invalid", kernel_width, 0},
    {"layer kernel in range", "layer 0 is invalid", layer_kernel, 0},
    {"mixer known", "out of range", config_mixer, 0},
    {"mlp known", "out of range", config_mlp, 0},
    {"gate known", "out of range", config_gate, 0},
    {"at most 8 CMS levels", "out of range", config_ncms, 0},
    {"sizes whose products fit", "a model size is too large", config_heads_huge, 0},
    {"optimizer known", "optimizer or schedule", train_optimizer, 0},
    {"LR schedule known", "optimizer or schedule", train_schedule, 0},
    {"only rmsnorm_backward and linear_dx accumulate", "cannot accumulate", accumulate_on_qkv_backward, 0},
    {"qkv's output holds 3A per token", "too small for its operand qkv", qkv_buffer_small, 0},
    {"attention's log-sum-exp holds H per token", "too small for its operand lse", lse_buffer_small, 0},
    {"an MLP writes D per token", "too small for its operand out", mlp_output_is_rstd, 0},
    {"down_proj is [D, W]", "wrong shape for its operand w_down", down_proj_transposed, 0},
    {"a linear op's input holds its weight's columns", "is too small for its operand", linear_input_small, 0},
    {"a placed buffer no op uses ends inside the arena", "memory plan 1 places buffer", plan_unused_buffer_past_arena,
     0},
    {"the logits exist", "has no logits buffer", logits_missing, 0},
    {"the logits hold V per token", "the logits buffer holds", logits_small, 0},
    {"the logits are written by an inference op", "no op of the inference plan uses the logits buffer",
     logits_backward_only, 0},
    {"each layer's mid exists", "has no mid.1 buffer", mid_missing, 0},
    {"each layer's resid holds D per token", "the resid.1 buffer holds 1 floats per token", resid_small, 0},
};

static int failures = 0;

#define CHECK(cond, ...)         \
    do {                         \
        if (!(cond)) {           \
            printf("FAIL: ");    \
            printf(__VA_ARGS__); \
            putchar('\n');       \
            failures++;          \
        }                        \
    } while (0)

/* The descriptor as the loader maps it, copied: dlsym, not tlm_so_open,
 * which would validate it first. */
static bool load(const char *path, blob *original) {
    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        printf("FAIL: cannot load %s: %s\n", path, dlerror());
        return false;
    }
    const uint8_t *bytes = dlsym(handle, TLM_SYM_BLOB);
    const uint64_t *size = dlsym(handle, TLM_SYM_BLOB_SIZE);
    bool ok = bytes && size && *size >= sizeof(tlm_blob_header);
    if (ok) {
        original->size = (size_t)*size;
        original->bytes = aligned_alloc(16, (original->size + 15) / 16 * 16);
        ok = original->bytes != NULL;
        if (ok) memcpy(original->bytes, bytes, original->size);
    }
    if (!ok) printf("FAIL: %s has no descriptor\n", path);
    dlclose(handle);
    return ok;
}

static void check_model(const char *path) {
    blob original;
    if (!load(path, &original)) {
        failures++;
        return;
    }
    tlm_err err = {""};
    bool ok = tlm_blob_validate(original.bytes, original.size, &err);
    CHECK(ok, "%s: the blob as written is refused: %s", path, err.msg);
    if (!ok) {
        free(original.bytes);
        return;
    }
    blob b = {.bytes = aligned_alloc(16, (original.size + 15) / 16 * 16), .size = original.size};
    if (!b.bytes) {
        printf("FAIL: out of memory\n");
        exit(1);
    }
    /* Damage the checksum does not cover is caught by the checksum. */
    memcpy(b.bytes, original.bytes, b.size);
    locate(&b);
    b.ops[0].flags ^= 1;
    CHECK(!tlm_blob_validate(b.bytes, b.size, &err) && strstr(err.msg, "checksum"),
          "%s: an op changed without fixing the checksum: `%s`", path, err.msg);
    /* Fixing the checksum of an untouched copy changes nothing. */
    memcpy(b.bytes, original.bytes, b.size);
    locate(&b);
    fix_checksum(&b);
    CHECK(tlm_blob_validate(b.bytes, b.size, &err), "%s: refixed checksum refused: %s", path, err.msg);

    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        memcpy(b.bytes, original.bytes, b.size);
        locate(&b);
        if (!cases[c].apply(&b)) continue;
        fix_checksum(&b);
        err.msg[0] = '\0';
        bool refused = !tlm_blob_validate(b.bytes, b.size, &err);
        CHECK(refused, "%s: %s: damaged blob accepted", path, cases[c].what);
        CHECK(!refused || strstr(err.msg, cases[c].message), "%s: %s: message `%s` lacks `%s`", path, cases[c].what,
              err.msg, cases[c].message);
        if (refused && strstr(err.msg, cases[c].message)) {
            cases[c].refused++;
            printf("ok: %s: %s: %s\n", path, cases[c].what, err.msg);
        }
    }
    free(b.bytes);
    free(original.bytes);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: blob_validate MODEL.so...\n");
        return 2;
    }
    for (int i = 1; i < argc; i++) check_model(argv[i]);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        CHECK(cases[c].refused > 0, "no model exercised `%s`", cases[c].what);
    if (failures) {
        printf("blob_validate: %d failure(s)\n", failures);
        return 1;
    }
    printf("blob_validate: all checks passed\n");
    return 0;
}
