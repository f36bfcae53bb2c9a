/* --emit-ir: the IR as text. Every table is printed in index order with the
 * names the runtime and checkpoints use, so a change in lowering shows up as
 * a readable diff in the golden tests. */
#include <stdio.h>

#include "arena_plan.h"
#include "ir.h"
#include "numfmt.h"
#include "vocabulary.h"

const char *ir_op_name(uint32_t kind) {
    static const char *names[TLM_OP_COUNT] = {
        [TLM_OP_EMBED] = "embed",
        [TLM_OP_RMSNORM] = "rmsnorm",
        [TLM_OP_QKV] = "qkv",
        [TLM_OP_ROPE] = "rope",
        [TLM_OP_ATTENTION] = "attention",
        [TLM_OP_OUT_PROJ] = "out_proj",
        [TLM_OP_MLP] = "mlp",
        [TLM_OP_HEAD] = "head",
        [TLM_OP_LOSS] = "loss",
        [TLM_OP_LOSS_BACKWARD] = "loss_backward",
        [TLM_OP_HEAD_BACKWARD] = "head_backward",
        [TLM_OP_RMSNORM_BACKWARD] = "rmsnorm_backward",
        [TLM_OP_MLP_BACKWARD] = "mlp_backward",
        [TLM_OP_OUT_PROJ_BACKWARD] = "out_proj_backward",
        [TLM_OP_ATTENTION_BACKWARD] = "attention_backward",
        [TLM_OP_ROPE_BACKWARD] = "rope_backward",
        [TLM_OP_QKV_BACKWARD] = "qkv_backward",
        [TLM_OP_EMBED_BACKWARD] = "embed_backward",
        [TLM_OP_LINEAR] = "linear",
        [TLM_OP_LINEAR_DW] = "linear_dw",
        [TLM_OP_LINEAR_DX] = "linear_dx",
        [TLM_OP_SIGMOID_GATE] = "sigmoid_gate",
        [TLM_OP_SIGMOID_GATE_BACKWARD] = "sigmoid_gate_backward",
        [TLM_OP_SILU_GATE] = "silu_gate",
        [TLM_OP_SILU_GATE_BACKWARD] = "silu_gate_backward",
        [TLM_OP_MEM_ACT] = "memory_act",
        [TLM_OP_MEM_ACT_BACKWARD] = "memory_act_backward",
        [TLM_OP_MEM_GATES] = "memory_gates",
        [TLM_OP_MEM_GATES_BACKWARD] = "memory_gates_backward",
        [TLM_OP_TITANS] = "titans",
        [TLM_OP_TITANS_BACKWARD] = "titans_backward",
        [TLM_OP_RMSNORM_HEADS] = "rmsnorm_heads",
        [TLM_OP_RMSNORM_HEADS_BACKWARD] = "rmsnorm_heads_backward",
    };
    return kind < TLM_OP_COUNT && names[kind] ? names[kind] : "?";
}

static const char *init_name(const tlm_abi_param *p, char *buf, size_t n) {
    if (p->init == TLM_INIT_ONES) return "ones";
    if (p->init == TLM_INIT_COUNT) return "zeros";
    snprintf(buf, n, "normal(%.6g)", p->init_std);
    return buf;
}

static void print_size(FILE *out, const tlm_abi_buffer *b) {
    if (b->per_token_t) fprintf(out, "[B, %lld, T, T]", (long long)b->per_token_t);
    else if (b->per_seq) fprintf(out, "%lld BT + %lld B floats", (long long)b->per_token, (long long)b->per_seq);
    else if (b->per_token == 1) fprintf(out, "[BT]");
    else fprintf(out, "[BT, %lld]", (long long)b->per_token);
}

static void print_operands(FILE *out, const ir_model *ir, const int32_t *ids, const char **names, int n) {
    int shown = 0;
    for (int i = 0; i < 4; i++) {
        if (ids[i] < 0 || ids[i] >= n) continue;
        fprintf(out, "%s%s", shown++ ? ", " : "", names[ids[i]]);
    }
    if (!shown) fputs("-", out);
    (void)ir;
}

static void print_plan(FILE *out, const ir_model *ir, const ir_plan *p, const char *what) {
    char a[32];
    int used = 0;
    int64_t sum = 0;
    for (int i = 0; i < ir->nbuffers; i++) {
        if (p->offsets[i] < 0) continue;
        used++;
        sum += tlm_buffer_bytes(&ir->buffers[i], p->head.batch, p->head.seq);
    }
    fprintf(out, "plan %s: B %lld, T %lld, ops 0..%u, %d buffers, arena %s bytes (%.1f MiB; %.1f MiB "
            "without reuse)\n", what, (long long)p->head.batch, (long long)p->head.seq, p->head.nops - 1, used,
            fmt_int(a, sizeof a, p->head.arena_bytes, 0), (double)p->head.arena_bytes / 1048576.0,
            (double)sum / 1048576.0);
    for (int i = 0; i < ir->nbuffers; i++) {
        if (p->offsets[i] < 0) continue;
        fprintf(out, "  %-14s @%-12lld ops %d..%d\n", ir->buffer_names[i], (long long)p->offsets[i],
                p->first[i], p->last[i]);
    }
}

void ir_print(FILE *out, const ir_model *ir) {
    const checked_model *m = ir->m;
    char a[32], b[32];
    fprintf(out, "; tlm IR, ABI version %u\n", TLM_ABI_VERSION);
    fprintf(out, "model %s: mixer %s, mlp %s, vocab %lld, context %lld, d_model %lld, layers %lld, "
            "heads %lld x %lld, tie_embeddings %s, norm_eps %g, rope_base %g\n",
            m->name, tlm_enum_name(&tlm_mixer_enum, m->mixer), tlm_enum_name(&tlm_mlp_enum, m->mlp), (long long)m->vocab, (long long)m->context,
            (long long)m->d_model, (long long)m->layers, (long long)m->heads, (long long)m->head_dim,
            m->tie_embeddings ? "true" : "false", m->norm_eps, m->rope_base);
    if (m->mixer == TLM_MIXER_GATED_ATTENTION)
        fprintf(out, "gate %s\n", m->gate == TLM_GATE_HEADWISE ? "headwise" : "elementwise");
    if (m->mixer == TLM_MIXER_TITANS)
        fprintf(out, "memory: chunk %lld, inner_lr %g\n", (long long)m->chunk, m->inner_lr);
    if (m->mixer == TLM_MIXER_HOPE_ATTENTION) {
        fprintf(out, "cms levels %d, periods", m->ncms);
        for (int i = 0; i < m->ncms; i++) fprintf(out, " %lld", (long long)m->cms[i]);
        fputc('\n', out);
    }
    fprintf(out, "\nlayers (%lld):\n", (long long)m->layers);
    for (int64_t l = 0; l < m->layers; l++)
        fprintf(out, "  layer %-3lld d_ff %-6lld (exact %.6g)  kernel k%d\n", (long long)l,
                (long long)m->widths[l], m->raw_widths[l], ir->layer_kernel[l]);

    fprintf(out, "\nkernels (%d specialisations):\n", ir->nkernels);
    for (int k = 0; k < ir->nkernels; k++) {
        fprintf(out, "  k%-3d %-6s d_model %lld width %-6lld %s, layers", k,
                ir->kernels[k].mlp == TLM_MLP_SWIGLU ? "swiglu" : "gelu",
                (long long)ir->kernels[k].d_model, (long long)ir->kernels[k].width, ir->kernel_symbols[k]);
        for (int64_t l = 0; l < m->layers; l++)
            if (ir->layer_kernel[l] == k) fprintf(out, " %lld", (long long)l);
        fputc('\n', out);
    }

    fprintf(out, "\nparams (%d tensors, %s floats in the block):\n", ir->nparams,
            fmt_int(a, sizeof a, ir->param_floats, 0));
    for (int i = 0; i < ir->nparams; i++) {
        const tlm_abi_param *p = &ir->params[i];
        char shape[48], init[32];
        if (p->ndim == 2) snprintf(shape, sizeof shape, "[%lld, %lld]", (long long)p->shape[0], (long long)p->shape[1]);
        else snprintf(shape, sizeof shape, "[%lld]", (long long)p->shape[0]);
        fprintf(out, "  p%-4d %-46s %-14s @%-10s %-16s %s", i, ir->param_names[i], shape,
                fmt_int(b, sizeof b, p->offset, 0), init_name(p, init, sizeof init),
                p->decay ? "decay" : "no decay");
        if (p->period > 1) fprintf(out, ", updated every %u steps", p->period);
        fputc('\n', out);
    }
    if (m->tie_embeddings) fprintf(out, "  (lm_head is tied to model.embed_tokens.weight)\n");

    fprintf(out, "\nbuffers (%d):\n", ir->nbuffers);
    for (int i = 0; i < ir->nbuffers; i++) {
        fprintf(out, "  b%-4d %-14s ", i, ir->buffer_names[i]);
        print_size(out, &ir->buffers[i]);
        fputc('\n', out);
    }

    fprintf(out, "\nops (%d: forward 0..%d, backward %d..%d):\n", ir->nops, ir->nforward - 1, ir->nforward,
            ir->nops - 1);
    for (int i = 0; i < ir->nops; i++) {
        const tlm_abi_op *op = &ir->ops[i];
        char layer[16] = "   ";
        if (op->layer >= 0) snprintf(layer, sizeof layer, "L%d", op->layer);
        fprintf(out, "  %4d %-4s %-18s ", i, layer, ir_op_name(op->kind));
        print_operands(out, ir, op->in, ir->buffer_names, ir->nbuffers);
        fputs(op->flags & TLM_OP_FLAG_ACCUMULATE ? " +> " : " -> ", out);
        print_operands(out, ir, op->out, ir->buffer_names, ir->nbuffers);
        int np = 0;
        for (int j = 0; j < 4; j++) np += op->param[j] >= 0;
        if (np) {
            fputs("  [", out);
            print_operands(out, ir, op->param, ir->param_names, ir->nparams);
            fputc(']', out);
        }
        if (op->kernel >= 0) fprintf(out, "  kernel k%d", op->kernel);
        fputc('\n', out);
    }
    fputc('\n', out);
    print_plan(out, ir, &ir->train, "train");
    fputc('\n', out);
    print_plan(out, ir, &ir->infer, "infer");
}
