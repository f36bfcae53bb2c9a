#include "profile.h"

#include <math.h>
#include <stdlib.h>
#include <time.h>

#include "op_context.h"

double tlm_profile_clock(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Rows of the matrix made of up to three adjacent parameters (op linear). */
static double linear_rows(const tlm_so *so, const int32_t w[3]) {
    double rows = 0;
    for (int j = 0; j < 3 && w[j] >= 0; j++) rows += (double)so->params[w[j]].shape[0];
    return rows;
}

double tlm_profile_op_flops(const tlm_model *m, const tlm_abi_op *op) {
    const tlm_op_sizes z = tlm_op_sizes_of(m);
    const double N = z.N, D = z.D, A = z.A, V = z.V;
    const double attention = 2.0 * z.B * z.H * z.hd * (double)z.T * (z.T + 1);
    switch (op->kind) {
    case TLM_OP_QKV: return 2 * N * D * 3 * A;
    case TLM_OP_QKV_BACKWARD: return 4 * N * D * 3 * A;
    case TLM_OP_OUT_PROJ: return 2 * N * A * D;
    case TLM_OP_OUT_PROJ_BACKWARD: return 4 * N * A * D;
    case TLM_OP_HEAD: return 2 * N * D * V;
    case TLM_OP_HEAD_BACKWARD: return 4 * N * D * V;
    case TLM_OP_ATTENTION: return attention;
    case TLM_OP_ATTENTION_BACKWARD: return 2 * attention;
    case TLM_OP_MLP:
    case TLM_OP_MLP_BACKWARD: {
        const double W = (double)m->so->kernels[op->kernel].width;
        const double products = op->mlp.param_w_gate >= 0 ? 3 : 2;
        return (op->kind == TLM_OP_MLP ? 2 : 4) * N * D * W * products;
    }
    case TLM_OP_LINEAR:
    case TLM_OP_LINEAR_DW:
    case TLM_OP_LINEAR_DX: {
        const int32_t w[3] = {op->linear.param_w0, op->linear.param_w1, op->linear.param_w2};
        return 2 * N * (double)m->so->params[w[0]].shape[1] * linear_rows(m->so, w);
    }
    default: return 0;
    }
}

void tlm_profile_op(tlm_profile *p, const tlm_model *m, const tlm_abi_op *op, double t0) {
    p->seconds[op->kind] += tlm_profile_clock() - t0;
    p->flops[op->kind] += tlm_profile_op_flops(m, op);
    p->calls[op->kind]++;
}

/* The op kinds that ran, by time, longest first. */
static int by_time(const tlm_profile *p, int order[TLM_OP_COUNT]) {
    int n = 0;
    for (int k = 0; k < TLM_OP_COUNT; k++)
        if (p->calls[k]) order[n++] = k;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && p->seconds[order[j]] > p->seconds[order[j - 1]]; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    return n;
}

static double ops_seconds(const tlm_profile *p) {
    double s = 0;
    for (int k = 0; k < TLM_OP_COUNT; k++) s += p->seconds[k];
    return s;
}

void tlm_profile_print(const tlm_profile *p, FILE *out) {
    if (p->steps < 1) return;
    int order[TLM_OP_COUNT], n = by_time(p, order);
    const double steps = (double)p->steps, total = p->step_seconds > 0 ? p->step_seconds : ops_seconds(p);
    fprintf(out, "profile: %lld step%s, %.1f ms a step\n", p->steps, p->steps == 1 ? "" : "s", 1e3 * total / steps);
    fprintf(out, "  %-24s %8s %10s %7s %9s\n", "op", "calls", "ms/step", "share", "GFLOP/s");
    for (int i = 0; i < n; i++) {
        int k = order[i];
        char rate[16] = "";
        if (p->flops[k] > 0 && p->seconds[k] > 0)
            snprintf(rate, sizeof rate, "%.1f", p->flops[k] / p->seconds[k] / 1e9);
        fprintf(out, "  %-24s %8lld %10.2f %6.1f%% %9s\n", tlm_op_name((uint32_t)k), p->calls[k],
                1e3 * p->seconds[k] / steps, 100 * p->seconds[k] / total, rate);
    }
    double rest = total - ops_seconds(p);
    fprintf(out, "  %-24s %8s %10.2f %6.1f%%\n", "outside the ops", "", 1e3 * rest / steps, 100 * rest / total);
    if (p->ranks < 2) return;
    /* Every rank's split when rank 0 gathered them, else its own. */
    const double own[3] = {total, p->comm_seconds, p->wait_seconds};
    for (int r = 0; r < (p->per_rank ? p->ranks : 1); r++) {
        const double *t = p->per_rank ? p->per_rank + 3 * r : own;
        double compute = t[0] - t[1] - t[2], all = t[0] > 0 ? t[0] : 1;
        fprintf(out,
                "  rank %d of %d, a step: compute %.2f ms (%.1f%%), communication %.2f ms (%.1f%%), wait %.2f ms "
                "(%.1f%%)\n",
                r, p->ranks, 1e3 * compute / steps, 100 * compute / all, 1e3 * t[1] / steps, 100 * t[1] / all,
                1e3 * t[2] / steps, 100 * t[2] / all);
    }
    fprintf(out, "  this rank passed on %ld of its %ld gradient buckets during the backward\n", p->early_buckets,
            p->buckets);
}

bool tlm_profile_write_json(const tlm_profile *p, FILE *out) {
    int order[TLM_OP_COUNT], n = by_time(p, order);
    const double total = p->step_seconds > 0 ? p->step_seconds : ops_seconds(p);
    fprintf(out, "{\"steps\": %lld, \"step_seconds\": %.9g, \"outside_ops_seconds\": %.9g, ", p->steps, total,
            total - ops_seconds(p));
    if (p->ranks > 1) {
        fprintf(out, "\"ranks\": %d, \"comm_seconds\": %.9g, \"wait_seconds\": %.9g, ", p->ranks, p->comm_seconds,
                p->wait_seconds);
        fprintf(out, "\"buckets\": %ld, \"early_buckets\": %ld, ", p->buckets, p->early_buckets);
    }
    if (p->ranks > 1 && p->per_rank) {
        fputs("\"per_rank\": [", out);
        for (int r = 0; r < p->ranks; r++)
            fprintf(out, "%s{\"step_seconds\": %.9g, \"comm_seconds\": %.9g, \"wait_seconds\": %.9g}", r ? ", " : "",
                    p->per_rank[3 * r], p->per_rank[3 * r + 1], p->per_rank[3 * r + 2]);
        fputs("], ", out);
    }
    fprintf(out, "\"ops\": [");
    for (int i = 0; i < n; i++) {
        int k = order[i];
        fprintf(out,
                "%s{\"op\": \"%s\", \"calls\": %lld, \"seconds\": %.9g, \"share\": %.6f, \"gflops\": ", i ? ", " : "",
                tlm_op_name((uint32_t)k), p->calls[k], p->seconds[k], total > 0 ? p->seconds[k] / total : 0);
        if (p->flops[k] > 0 && p->seconds[k] > 0) fprintf(out, "%.4g}", p->flops[k] / p->seconds[k] / 1e9);
        else fprintf(out, "null}");
    }
    fprintf(out, "]}");
    return !ferror(out);
}
