/* The device executor's storage guards (gpu_executor.c) on the emulated
 * device. In --precision bf16 some buffers are stored in bf16
 * (tlm_gpu_bf16_buffers), and an op whose kernel takes its operands in one
 * storage refuses, with one line, a plan in which they disagree:
 *
 *   loss_backward           the logits and dlogits
 *   sigmoid_gate (+ back)   y, gate_pre and out (the backward: y, gate_pre)
 *   silu_gate (+ back)      x, gate_pre and out (the backward: x, gate_pre)
 *   memory_act (+ back)     qkv, act and mem_qkv (the backward: qkv, act)
 *   titans                  the memory's q, k, v (mem_qkv) and its read-out y
 *   rmsnorm_heads           the per-head norm's x (the read-out) and y
 *   attention, sampling     the KV cache and qkv (filling it, decoding)
 *
 * The planner never makes such a plan, so each case makes one: the model's
 * planned storage with one operand of the guarded op flipped after the
 * model is put on the device (the KV cache: its storage flipped after it
 * is opened). For the logits and dlogits, which the IR keeps in one buffer,
 * the op list is changed first: a dlogits buffer of its own, which the
 * planner keeps in the logits' storage (fp32), then made bf16.
 *
 * The buffers' flips are safe to make: each turns a buffer that nothing
 * reads or writes at its new size before the guarded op (the op's own
 * output in a forward, an input of a backward op that no earlier backward
 * op reads, a dlogits that only loss_backward writes), so a missing guard
 * shows as a run accepted, not as a crash. The KV cache's flip (a bf16
 * cache taken as fp32) is not: unguarded, the cache's copies are twice
 * its rows' size, which the emulated device refuses at the second layer
 * as out of range (another op, another message: the case fails too).
 *
 * Each case checks: the run is refused (the forward's NaN, the backward's
 * or the sampling call's device error), with the executor's one line naming
 * the first op of that kind by index and name and the operands it guards;
 * the model then refuses further work; destroying it gives back every byte
 * it took on the device (tlm_device_memory_in_use). The forward and
 * backward cases run twice: refused on their step's first run (op by op),
 * and refused while a CUDA graph captures the step, after one correct step
 * (the emulated device captures graphs too). Then the same model with its
 * planned storage (and the changed op list with its own) runs the same
 * steps, from graphs as well, without an error.
 *
 * usage: test_gpu_guards GATED.so TITANS.so
 * (a gated-attention model, for the sigmoid gate, the logits and the KV
 * cache; a Titans model, for the SiLU gate and the memory activation) */
#include "gpu_model.h"
#include "graph_cache.h"
#include "model_util.h"

enum { B = 2, T = 8 }; /* not the models' stored plan (2 × 12): planned here */

typedef enum { FORWARD, BACKWARD, PREFILL, DECODE } phase;

typedef struct guard_case {
    uint32_t kind;       /* the guarded op */
    const char *operand; /* the operand flipped ("": the KV cache's storage) */
    const char *refusal; /* the executor's words after "op N (name): " */
} guard_case;

static const char SIGMOID_GATE[] = "the sigmoid gate's y, gate_pre and out are not all in one storage";
static const char SILU_GATE[] = "the SiLU gate's x, gate_pre and out are not all in one storage";
static const char MEMORY_ACT[] = "the memory activation's qkv, act and mem_qkv are not all in one storage";

static const guard_case gated_cases[] = {
    {TLM_OP_SIGMOID_GATE, "out", SIGMOID_GATE},
    {TLM_OP_SIGMOID_GATE_BACKWARD, "y", SIGMOID_GATE},
    {TLM_OP_SIGMOID_GATE_BACKWARD, "gate_pre", SIGMOID_GATE},
    {TLM_OP_ATTENTION, "", "the KV cache is fp32 but qkv is bf16"}, /* filling, then decoding */
};
static const guard_case titans_cases[] = {
    {TLM_OP_SILU_GATE, "out", SILU_GATE},
    {TLM_OP_SILU_GATE_BACKWARD, "x", SILU_GATE},
    {TLM_OP_SILU_GATE_BACKWARD, "gate_pre", SILU_GATE},
    {TLM_OP_MEM_ACT, "act", MEMORY_ACT},
    {TLM_OP_MEM_ACT, "mem_qkv", MEMORY_ACT},
    {TLM_OP_MEM_ACT_BACKWARD, "qkv", MEMORY_ACT},
    {TLM_OP_MEM_ACT_BACKWARD, "act", MEMORY_ACT},
    {TLM_OP_TITANS, "y", "the memory's q, k, v and y are not all in one storage"},
    {TLM_OP_RMSNORM_HEADS, "y", "the per-head norm's x and y are not all in one storage"},
};
static const guard_case logits_case = {TLM_OP_LOSS_BACKWARD, "dlogits",
                                       "the logits and dlogits are not all in one storage"};

static int first_op(const tlm_so *so, uint32_t kind) {
    for (uint32_t k = 0; k < so->header->nops; k++)
        if (so->ops[k].kind == kind) return (int)k;
    return -1;
}

/* The buffer of the op's operand by its name in the op table, or -1. */
static int32_t operand(const tlm_abi_op *op, const char *name) {
    for (int j = 0; j < 4; j++) {
        if (!strcmp(tlm_op_table[op->kind].in[j], name)) return op->in[j];
        if (!strcmp(tlm_op_table[op->kind].out[j], name)) return op->out[j];
    }
    return -1;
}

static bool train_step(tlm_model *m, const int32_t *tokens, const int32_t *targets) {
    const double loss = tlm_model_forward(m, tokens, targets, B, T);
    if (isfinite(loss)) tlm_model_backward(m, 1.0f);
    return isfinite(loss) && !tlm_model_device_error(m);
}

static bool sample(tlm_model *m, const int32_t *tokens) {
    return tlm_model_prefill(m, tokens, T / 2) && tlm_model_decode(m, tokens[T / 2], T / 2);
}

/* The model on the device with its planned storage and parameters: a
 * training one of B × T, or (sampling) an inference one of 1 × T with its
 * cache open. */
static bool create(tlm_model *m, const tlm_so *so, tlm_device *dev, bool sampling, const char *what) {
    tlm_err err = {""};
    if (!tlm_model_create_on(m, so, dev, TLM_PRECISION_BF16, sampling ? 1 : B, T, !sampling, 0, &err)) {
        CHECK(false, "%s: cannot create the model: %s", what, err.msg);
        return false;
    }
    init_test_params(m, 3, 5.0, 0.2);
    bool ok = tlm_model_params_to_device(m, &err) && (!sampling || tlm_model_cache_open(m, &err));
    CHECK(ok, "%s: %s", what, err.msg);
    if (!ok) tlm_model_destroy(m);
    return ok;
}

/* One case in one phase: the flip, the refused run, the model's state
 * after it, the device memory it gives back. */
static void refused(const tlm_so *so, tlm_device *dev, const guard_case *c, phase ph, bool in_graph,
                    const int32_t *tokens, const int32_t *targets) {
    const char *model = tlm_so_str(so, so->config->name);
    static const char *const phases[] = {"forward", "backward", "prefill", "decode"};
    char what[160], want[320];
    snprintf(what, sizeof what, "%s %s (%s %s%s)", model, tlm_op_name(c->kind), *c->operand ? c->operand : "KV cache",
             phases[ph], in_graph ? ", captured" : "");
    const int k = first_op(so, c->kind);
    CHECK(k >= 0, "%s: the model has no such op", what);
    if (k < 0) return;
    snprintf(want, sizeof want, "on the device, op %d (%s): %s", k, tlm_op_name(c->kind), c->refusal);
    const uint64_t before = tlm_device_memory_in_use(dev);
    tlm_model m;
    if (!create(&m, so, dev, ph >= PREFILL, what)) return;
    /* the steps before the refused one run as planned */
    bool ok = true;
    if (in_graph) ok = train_step(&m, tokens, targets); /* the step's ranges seen once: captured next */
    if (ph == BACKWARD) ok = ok && isfinite(tlm_model_forward(&m, tokens, targets, B, T));
    if (ph == DECODE) ok = tlm_model_prefill(&m, tokens, T / 2);
    CHECK(ok, "%s: the planned steps before the flip: %s", what,
          tlm_model_device_error(&m) ? tlm_model_device_error(&m) : "refused");
    /* the flip: the plan stores the operands in one storage, no longer */
    if (*c->operand) {
        const int32_t b = operand(&so->ops[k], c->operand);
        CHECK(b >= 0, "%s: no operand %s", what, c->operand);
        if (b >= 0) m.gpu->bf16_buffers[b] = !m.gpu->bf16_buffers[b];
    } else {
        CHECK(m.gpu->kv_bf16, "%s: the planned KV cache is fp32", what);
        m.gpu->kv_bf16 = false;
    }
    const uint64_t plain_runs = tlm_graph_cache_stats(m.gpu->graphs).plain_runs;
    switch (ph) {
    case FORWARD: ok = isfinite(tlm_model_forward(&m, tokens, targets, B, T)); break;
    case BACKWARD:
        tlm_model_backward(&m, 1.0f);
        ok = !tlm_model_device_error(&m);
        break;
    case PREFILL: ok = tlm_model_prefill(&m, tokens, T / 2); break;
    case DECODE: ok = tlm_model_decode(&m, tokens[T / 2], T / 2); break;
    }
    const char *said = tlm_model_device_error(&m);
    tlm_err got; /* a copy: the model's message is freed with it */
    snprintf(got.msg, sizeof got.msg, "%s", ok ? "accepted" : said ? said : "no error");
    CHECK(!ok && said && !strcmp(said, want), "%s: %s; expected \"%s\"", what, got.msg, want);
    /* captured: no op ran outside the capture (the loss's backward, which
     * runs op by op, is the one refused phase that cannot be captured) */
    CHECK(!in_graph || tlm_graph_cache_stats(m.gpu->graphs).plain_runs == plain_runs, "%s: not refused in a capture",
          what);
    CHECK(!isfinite(tlm_model_forward(&m, tokens, ph >= PREFILL ? NULL : targets, ph >= PREFILL ? 1 : B, T)),
          "%s: the model ran again after the refusal", what);
    tlm_model_destroy(&m);
    const uint64_t after = tlm_device_memory_in_use(dev);
    CHECK(after == before, "%s: %lld bytes of device memory left behind", what, (long long)(after - before));
    printf("%s: %s\n", what, got.msg);
}

/* The same model with its planned storage: the steps the cases refused
 * run without an error, op by op and (training) from graphs. */
static void planned_runs(const tlm_so *so, const char *model, tlm_device *dev, bool sampling, const int32_t *tokens,
                         const int32_t *targets) {
    const uint64_t before = tlm_device_memory_in_use(dev);
    tlm_model m;
    if (!create(&m, so, dev, sampling, model)) return;
    bool ok = sampling ? sample(&m, tokens)
                       : train_step(&m, tokens, targets) && train_step(&m, tokens, targets) &&
                             train_step(&m, tokens, targets);
    CHECK(ok, "%s: the planned storage %s: %s", model, sampling ? "sampling" : "training",
          tlm_model_device_error(&m) ? tlm_model_device_error(&m) : "refused");
    CHECK(sampling || tlm_graph_cache_stats(m.gpu->graphs).launches > 0, "%s: no step ran from a graph", model);
    tlm_model_destroy(&m);
    CHECK(tlm_device_memory_in_use(dev) == before, "%s: device memory left behind", model);
    printf("%s, the planned storage: %s runs\n", model, sampling ? "sampling" : "training");
}

static void run_cases(const tlm_so *so, tlm_device *dev, const guard_case *cases, size_t n, const int32_t *tokens,
                      const int32_t *targets) {
    for (size_t i = 0; i < n; i++) {
        const guard_case *c = &cases[i];
        if (!*c->operand) {
            refused(so, dev, c, PREFILL, false, tokens, targets);
            refused(so, dev, c, DECODE, false, tokens, targets);
            continue;
        }
        const bool forward = c->kind == TLM_OP_SIGMOID_GATE || c->kind == TLM_OP_SILU_GATE ||
                             c->kind == TLM_OP_MEM_ACT || c->kind == TLM_OP_TITANS || c->kind == TLM_OP_RMSNORM_HEADS;
        refused(so, dev, c, forward ? FORWARD : BACKWARD, false, tokens, targets);
        refused(so, dev, c, forward ? FORWARD : BACKWARD, true, tokens, targets);
    }
    planned_runs(so, tlm_so_str(so, so->config->name), dev, false, tokens, targets);
}

/* so with dlogits apart from the logits: a buffer of its own (the logits'
 * shape) that the loss's backward writes and the head's backward reads.
 * The tables are the caller's to free (buffers, ops). */
static tlm_so dlogits_apart(const tlm_so *so, tlm_blob_header *header) {
    const uint32_t nb = so->header->nbuffers, nops = so->header->nops;
    tlm_abi_buffer *buffers = xcalloc(nb + 1, sizeof *buffers);
    tlm_abi_op *ops = xcalloc(nops, sizeof *ops);
    memcpy(buffers, so->buffers, nb * sizeof *buffers);
    memcpy(ops, so->ops, nops * sizeof *ops);
    const int k = first_op(so, TLM_OP_LOSS_BACKWARD);
    buffers[nb] = buffers[ops[k].loss_backward.out_dlogits];
    buffers[nb].role = TLM_B_D_NORM; /* not found as the logits by role */
    for (uint32_t i = 0; i < nops; i++) {
        if (ops[i].kind == TLM_OP_LOSS_BACKWARD) ops[i].loss_backward.out_dlogits = (int32_t)nb;
        if (ops[i].kind == TLM_OP_HEAD_BACKWARD) ops[i].head_backward.in_dlogits = (int32_t)nb;
    }
    *header = *so->header;
    header->nbuffers = nb + 1;
    tlm_so apart = *so;
    apart.header = header;
    apart.buffers = buffers;
    apart.ops = ops;
    return apart;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: test_gpu_guards GATED.so TITANS.so\n");
        return 2;
    }
    tlm_set_num_threads(2);
    tlm_device *dev = open_test_device();
    tlm_so gated, titans;
    open_so(argv[1], &gated);
    open_so(argv[2], &titans);
    CHECK(gated.config->mixer == TLM_MIXER_GATED_ATTENTION && titans.config->mixer == TLM_MIXER_TITANS,
          "usage: a gated-attention model, then a Titans one");
    int32_t tokens[B * T], targets[B * T];
    tlm_rng rng;
    tlm_rng_seed(&rng, 11);
    draw_batch(&rng, gated.config->vocab < titans.config->vocab ? gated.config->vocab : titans.config->vocab, B, T, 0,
               tokens, targets);

    run_cases(&gated, dev, gated_cases, sizeof gated_cases / sizeof *gated_cases, tokens, targets);
    planned_runs(&gated, tlm_so_str(&gated, gated.config->name), dev, true, tokens, targets);
    run_cases(&titans, dev, titans_cases, sizeof titans_cases / sizeof *titans_cases, tokens, targets);

    tlm_blob_header header;
    tlm_so apart = dlogits_apart(&gated, &header);
    tlm_model planned;
    if (create(&planned, &apart, dev, false, "dlogits apart")) {
        const int32_t lo = first_op(&apart, TLM_OP_HEAD), logits = apart.ops[lo].head.out_logits;
        const int32_t dlogits = (int32_t)gated.header->nbuffers;
        CHECK(!planned.gpu->bf16_buffers[logits] && !planned.gpu->bf16_buffers[dlogits],
              "dlogits apart: the planner stores the logits in %s and dlogits in %s",
              planned.gpu->bf16_buffers[logits] ? "bf16" : "fp32",
              planned.gpu->bf16_buffers[dlogits] ? "bf16" : "fp32");
        tlm_model_destroy(&planned);
    }
    refused(&apart, dev, &logits_case, BACKWARD, false, tokens, targets);
    planned_runs(&apart, "dlogits apart", dev, false, tokens, targets);
    free((void *)apart.buffers);
    free((void *)apart.ops);

    tlm_so_close(&titans);
    tlm_so_close(&gated);
    tlm_device_close(dev);
    return test_finish("test_gpu_guards");
}
