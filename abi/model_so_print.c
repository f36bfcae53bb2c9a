/* The tables of a model.so descriptor as text: the one printer behind
 * `tlmc --emit-ir` (every section) and `tlm-run info` (a summary, with
 * --params and --buffers for the long tables). It reads the validated
 * tables only, so what it shows is what the runtime executes; every table
 * is printed in index order with the names the runtime and checkpoints use,
 * so a change in lowering shows up as a readable diff in the golden tests. */
#include <stdlib.h>

#include "arena_plan.h"
#include "model_so.h"
#include "numfmt.h"

void tlm_so_print_config(FILE *out, const tlm_so_tables *t) {
    const tlm_abi_config *m = t->config;
    char a[32], b[32];
    fprintf(out,
            "model %s: mixer %s, mlp %s, vocab %lld, context %lld, d_model %lld, layers %lld, "
            "heads %lld x %lld, tie_embeddings %s, norm_eps %g, rope_base %g\n",
            t->model_name, tlm_enum_name(&tlm_mixer_enum, m->mixer), tlm_enum_name(&tlm_mlp_enum, m->mlp),
            (long long)m->vocab, (long long)m->context, (long long)m->d_model, (long long)m->layers,
            (long long)m->heads, (long long)m->head_dim, m->tie_embeddings ? "true" : "false", m->norm_eps,
            m->rope_base);
    if (m->mixer == TLM_MIXER_GATED_ATTENTION)
        fprintf(out, "  output gate: %s (%s)\n", tlm_enum_name(&tlm_gate_enum, m->gate),
                tlm_enum_help(&tlm_gate_enum, m->gate));
    if (m->mixer == TLM_MIXER_TITANS)
        fprintf(out, "  memory: chunk %lld, inner_lr %g\n", (long long)m->chunk, m->inner_lr);
    if (m->mixer == TLM_MIXER_HOPE_ATTENTION) {
        fprintf(out, "  CMS: %u levels, updated every", m->ncms);
        for (uint32_t i = 0; i < m->ncms; i++) fprintf(out, "%s %lld", i ? "," : "", (long long)m->cms[i]);
        fputs(" steps\n", out);
    }
    if (t->tokenizer_path) {
        fprintf(out, "  tokenizer %s (", t->tokenizer_path);
        for (int i = 0; i < 8; i++) fprintf(out, "%02x", m->tokenizer_hash[i]);
        fputs("...)\n", out);
    }
    if (m->budget_width)
        fprintf(out, "  quantum %lld, budget uniform(%lld), met exactly\n", (long long)m->quantum,
                (long long)m->budget_width);
    else fprintf(out, "  quantum %lld, no budget\n", (long long)m->quantum);
    int64_t params = 0;
    for (uint32_t i = 0; i < t->nparams; i++) params += t->params[i].count;
    fprintf(out, "  parameters: %s in %u tensors (%s floats in the block)\n", fmt_int(a, sizeof a, params, 0),
            t->nparams, fmt_int(b, sizeof b, m->param_floats, 0));
}

void tlm_so_print_layers(FILE *out, const tlm_so_tables *t) {
    fprintf(out, "layers (%u):\n", t->nlayers);
    for (uint32_t l = 0; l < t->nlayers; l++)
        fprintf(out, "  layer %-3u d_ff %-6lld (exact %.6g)  kernel k%u\n", l, (long long)t->layers[l].width,
                t->layers[l].exact_width, t->layers[l].kernel);
}

void tlm_so_print_kernels(FILE *out, const tlm_so_tables *t) {
    fprintf(out, "kernels (%u specialisations):\n", t->nkernels);
    for (uint32_t k = 0; k < t->nkernels; k++) {
        const tlm_abi_kernel *kernel = &t->kernels[k];
        fprintf(out, "  k%-3u %-6s d_model %lld width %-6lld %s, layers", k, tlm_enum_name(&tlm_mlp_enum, kernel->mlp),
                (long long)kernel->d_model, (long long)kernel->width, t->kernel_symbols[k]);
        for (uint32_t l = 0; l < t->nlayers; l++)
            if (t->layers[l].kernel == k) fprintf(out, " %u", l);
        fprintf(out, "\n        CPU: %s (%s)\n", tlm_enum_title(&tlm_mlp_impl_enum, kernel->cpu_impl),
                t->kernel_impl_whys[k]);
    }
}

void tlm_so_print_params(FILE *out, const tlm_so_tables *t) {
    char a[32];
    fprintf(out, "params (%u tensors, %s floats in the block):\n", t->nparams,
            fmt_int(a, sizeof a, t->config->param_floats, 0));
    for (uint32_t i = 0; i < t->nparams; i++) {
        const tlm_abi_param *p = &t->params[i];
        char shape[48], init[32];
        if (p->ndim == 2) snprintf(shape, sizeof shape, "[%lld, %lld]", (long long)p->shape[0], (long long)p->shape[1]);
        else snprintf(shape, sizeof shape, "[%lld]", (long long)p->shape[0]);
        if (p->init == TLM_INIT_NORMAL) snprintf(init, sizeof init, "normal(%.6g)", p->init_std);
        else snprintf(init, sizeof init, "%s", tlm_enum_name(&tlm_init_enum, p->init));
        fprintf(out, "  p%-4u %-46s %-14s @%-10s %-16s %s", i, t->param_names[i], shape,
                fmt_int(a, sizeof a, p->offset, 0), init, p->decay ? "decay" : "no decay");
        if (p->period > 1) fprintf(out, ", updated every %u steps", p->period);
        fputc('\n', out);
    }
    if (t->config->tie_embeddings) fputs("  (lm_head is tied to model.embed_tokens.weight)\n", out);
}

static void print_size(FILE *out, const tlm_abi_buffer *b) {
    if (b->per_token_t) fprintf(out, "[B, %lld, T, T]", (long long)b->per_token_t);
    else if (b->per_seq) fprintf(out, "%lld BT + %lld B floats", (long long)b->per_token, (long long)b->per_seq);
    else if (b->per_token == 1) fputs("[BT]", out);
    else fprintf(out, "[BT, %lld]", (long long)b->per_token);
}

void tlm_so_print_buffers(FILE *out, const tlm_so_tables *t) {
    fprintf(out, "buffers (%u):\n", t->nbuffers);
    for (uint32_t i = 0; i < t->nbuffers; i++) {
        fprintf(out, "  b%-4u %-14s ", i, t->buffer_names[i]);
        print_size(out, &t->buffers[i]);
        fputc('\n', out);
    }
}

/* An op's operands of one kind as slot=name, or "-" when it has none. */
static void print_operands(FILE *out, const int32_t ids[4], const char *const slots[4], const char *const *names) {
    int shown = 0;
    for (int i = 0; i < 4; i++) {
        if (ids[i] < 0) continue;
        fprintf(out, "%s%s=%s", shown++ ? " " : "", slots[i], names[ids[i]]);
    }
    if (!shown) fputc('-', out);
}

void tlm_so_print_ops(FILE *out, const tlm_so_tables *t) {
    uint32_t nforward = t->plans[TLM_PLAN_INFER].nops;
    fprintf(out, "ops (%u: forward 0..%u, backward %u..%u):\n", t->nops, nforward - 1, nforward, t->nops - 1);
    for (uint32_t i = 0; i < t->nops; i++) {
        const tlm_abi_op *op = &t->ops[i];
        const tlm_op_info *info = &tlm_op_table[op->kind];
        char layer[16] = "";
        if (op->layer >= 0) snprintf(layer, sizeof layer, "L%d", op->layer);
        fprintf(out, "  %4u %-4s %-18s ", i, layer, info->name);
        print_operands(out, op->in, info->in, t->buffer_names);
        fputs(op->flags & TLM_OP_FLAG_ACCUMULATE ? " +> " : " -> ", out);
        print_operands(out, op->out, info->out, t->buffer_names);
        if (op->param[0] >= 0 || op->param[1] >= 0 || op->param[2] >= 0 || op->param[3] >= 0) {
            fputs("  [", out);
            print_operands(out, op->param, info->param, t->param_names);
            fputc(']', out);
        }
        if (op->kernel >= 0) fprintf(out, "  kernel k%d", op->kernel);
        fputc('\n', out);
    }
}

bool tlm_so_print_plan(FILE *out, const tlm_so_tables *t, int plan, bool placements) {
    const tlm_abi_plan *p = &t->plans[plan];
    const int64_t *offsets = t->plan_offsets[plan];
    char a[32];
    uint32_t used = 0;
    int64_t without_reuse = 0;
    for (uint32_t i = 0; i < t->nbuffers; i++) {
        if (offsets[i] < 0) continue;
        used++;
        without_reuse += tlm_buffer_bytes(&t->buffers[i], p->batch, p->seq);
    }
    fprintf(out,
            "plan %s: B %lld, T %lld, ops 0..%u, %u buffers, arena %s bytes (%.1f MiB; %.1f MiB "
            "without reuse)\n",
            p->kind == TLM_PLAN_TRAIN ? "train" : "infer", (long long)p->batch, (long long)p->seq, p->nops - 1, used,
            fmt_int(a, sizeof a, p->arena_bytes, 0), (double)p->arena_bytes / 1048576.0,
            (double)without_reuse / 1048576.0);
    if (!placements) return true;
    /* Lifetimes are not stored; the planner that made the plan recomputes
     * them from the ops. */
    size_t n = (size_t)t->nbuffers + 1;
    int64_t *scratch = malloc(n * sizeof *scratch);
    int *first = malloc(n * sizeof *first), *last = malloc(n * sizeof *last);
    bool ok =
        scratch && first && last &&
        tlm_plan_arena(t->buffers, (int)t->nbuffers, t->ops, (int)p->nops, p->batch, p->seq, scratch, first, last) >= 0;
    for (uint32_t i = 0; ok && i < t->nbuffers; i++) {
        if (offsets[i] < 0) continue;
        fprintf(out, "  %-14s @%-10lld %10s bytes  ops %d..%d\n", t->buffer_names[i], (long long)offsets[i],
                fmt_int(a, sizeof a, tlm_buffer_bytes(&t->buffers[i], p->batch, p->seq), 0), first[i], last[i]);
    }
    free(scratch);
    free(first);
    free(last);
    return ok;
}

bool tlm_so_print_all(FILE *out, const tlm_so_tables *t) {
    tlm_so_print_config(out, t);
    fputc('\n', out);
    tlm_so_print_layers(out, t);
    fputc('\n', out);
    tlm_so_print_kernels(out, t);
    fputc('\n', out);
    tlm_so_print_params(out, t);
    fputc('\n', out);
    tlm_so_print_buffers(out, t);
    fputc('\n', out);
    tlm_so_print_ops(out, t);
    for (int p = 0; p < TLM_PLAN_COUNT; p++) {
        fputc('\n', out);
        if (!tlm_so_print_plan(out, t, p, true)) return false;
    }
    return true;
}
