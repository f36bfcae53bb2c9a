#include "profile.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "op_context.h"
#include "tlm_rt/ops.h"

static bool read_seconds(clockid_t clock, double *seconds) {
    struct timespec ts;
    if (clock_gettime(clock, &ts) != 0) return false;
    *seconds = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
    return true;
}

static double seconds_on(clockid_t clock) {
    double s;
    return read_seconds(clock, &s) ? s : 0;
}

double tlm_profile_clock(void) { return seconds_on(CLOCK_MONOTONIC); }

/* Notes the clock of each thread of a full team. The pool keeps its threads
 * from one region to the next of the same size, and OpenBLAS's OpenMP
 * build runs its GEMMs on them too; but libgomp ends the threads past a
 * smaller team's size (of two or more) and starts new ones for the next
 * full team, whose clocks are then noted again (tlm_profile_now). */
static void note_clocks(tlm_profile *p) {
    int want = p->threads < TLM_PROFILE_MAX_CLOCKS ? p->threads : TLM_PROFILE_MAX_CLOCKS;
    bool met[TLM_PROFILE_MAX_CLOCKS] = {false};
    clockid_t ids[TLM_PROFILE_MAX_CLOCKS];
#pragma omp parallel num_threads(want)
    {
        int i = tlm_thread_index();
        if (i < want && pthread_getcpuclockid(pthread_self(), &ids[i]) == 0) met[i] = true;
    }
    p->nclocks = 0;
    for (int i = 0; i < want; i++)
        if (met[i]) p->clocks[p->nclocks++] = ids[i];
    p->clocks_noted++;
}

void tlm_profile_watch_threads(tlm_profile *p, int threads) {
    p->threads = threads;
    note_clocks(p);
}

tlm_profile_mark tlm_profile_now(tlm_profile *p) {
    tlm_profile_mark t = {seconds_on(CLOCK_MONOTONIC), 0, 0, 0};
    if (!p->nclocks) return t;
    t.process = seconds_on(CLOCK_PROCESS_CPUTIME_ID);
    bool all = true;
    for (int i = 0; i < p->nclocks && all; i++) {
        double s;
        all = read_seconds(p->clocks[i], &s);
        if (all) t.cpu += s;
    }
    /* A thread noted is gone: note the pool again. This mark's own sum is
     * not comparable with the last, so the interval ending here takes the
     * process's clock instead (generation 0: none). */
    if (!all) {
        note_clocks(p);
        return t;
    }
    t.clocks = p->clocks_noted;
    return t;
}

/* CPU seconds from t0 to t1: the threads' clocks where both marks read the
 * same threads, else the process's clock (exact once the threads sleep;
 * with spinning waits it adds a running thread's time at ticks only). */
static double cpu_between(tlm_profile_mark t0, tlm_profile_mark t1) {
    if (t0.clocks && t0.clocks == t1.clocks && t1.cpu >= t0.cpu) return t1.cpu - t0.cpu;
    return t1.process - t0.process;
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
    /* the memory's share of flops.c's count, 24 H hd^2 a token, split as
     * attention's is: a third forward, two thirds backward */
    case TLM_OP_TITANS: return 8 * N * z.H * (double)z.hd * z.hd;
    case TLM_OP_TITANS_BACKWARD: return 16 * N * z.H * (double)z.hd * z.hd;
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

void tlm_profile_op(tlm_profile *p, const tlm_model *m, const tlm_abi_op *op, tlm_profile_mark t0) {
    const tlm_profile_mark t1 = tlm_profile_now(p);
    p->seconds[op->kind] += t1.wall - t0.wall;
    p->cpu_seconds[op->kind] += cpu_between(t0, t1);
    p->flops[op->kind] += tlm_profile_op_flops(m, op);
    p->calls[op->kind]++;
}

void tlm_profile_steps(tlm_profile *p, long long steps, tlm_profile_mark t0) {
    const tlm_profile_mark t1 = tlm_profile_now(p);
    p->step_seconds += t1.wall - t0.wall;
    p->step_cpu_seconds += cpu_between(t0, t1);
    p->steps += steps;
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

static double ops_cpu_seconds(const tlm_profile *p) {
    double s = 0;
    for (int k = 0; k < TLM_OP_COUNT; k++) s += p->cpu_seconds[k];
    return s;
}

/* The profiled steps' wall and CPU seconds (the ops' alone where the steps
 * were not timed). */
static double total_seconds(const tlm_profile *p) { return p->step_seconds > 0 ? p->step_seconds : ops_seconds(p); }
static double total_cpu_seconds(const tlm_profile *p) {
    return p->step_seconds > 0 ? p->step_cpu_seconds : ops_cpu_seconds(p);
}

/* Whether waiting threads spin, and so count as busy. */
static bool waits_spin(const tlm_profile *p) { return p->threads > 1 && !tlm_threads_wait_passively(); }

/* The share of threads x `wall` the threads spent on a CPU (at most 1). */
static double busy_share(const tlm_profile *p, double cpu, double wall) {
    double capacity = (double)p->threads * wall;
    if (capacity <= 0) return 0;
    double b = cpu / capacity;
    return b < 0 ? 0 : b > 1 ? 1 : b;
}

tlm_profile *tlm_profile_create(bool device_kernels) {
    tlm_profile *p = calloc(1, sizeof *p);
    if (p && device_kernels && !(p->kernels = calloc(1, sizeof *p->kernels))) {
        free(p);
        return NULL;
    }
    return p;
}

void tlm_profile_destroy(tlm_profile *p) {
    if (!p) return;
    free(p->per_rank);
    free(p->kernels);
    free(p);
}

/* The device table's rows shown under the op table (all go in the log). */
enum { SHOWN_KERNELS = 40 };

void tlm_profile_print(const tlm_profile *p, FILE *out) {
    if (p->steps < 1) return;
    int order[TLM_OP_COUNT], n = by_time(p, order);
    const double steps = (double)p->steps, total = total_seconds(p), total_cpu = total_cpu_seconds(p);
    const bool cpu = p->threads > 0;
    fprintf(out, "profile: %lld step%s, %.1f ms a step\n", p->steps, p->steps == 1 ? "" : "s", 1e3 * total / steps);
    fprintf(out, "  %-24s %8s %10s %7s %9s%s\n", "op", "calls", "ms/step", "share", "GFLOP/s", cpu ? "     busy" : "");
    for (int i = 0; i < n; i++) {
        int k = order[i];
        char rate[16] = "";
        if (p->flops[k] > 0 && p->seconds[k] > 0)
            snprintf(rate, sizeof rate, "%.1f", p->flops[k] / p->seconds[k] / 1e9);
        fprintf(out, "  %-24s %8lld %10.2f %6.1f%% %9s", tlm_op_name((uint32_t)k), p->calls[k],
                1e3 * p->seconds[k] / steps, 100 * p->seconds[k] / total, rate);
        if (cpu) fprintf(out, " %7.1f%%", 100 * busy_share(p, p->cpu_seconds[k], p->seconds[k]));
        fputc('\n', out);
    }
    double rest = total - ops_seconds(p);
    fprintf(out, "  %-24s %8s %10.2f %6.1f%%", "outside the ops", "", 1e3 * rest / steps, 100 * rest / total);
    if (cpu) fprintf(out, " %9s %7.1f%%", "", 100 * busy_share(p, total_cpu - ops_cpu_seconds(p), rest));
    fputc('\n', out);
    if (p->kernels) tlm_kernel_times_print(p->kernels, steps, total, SHOWN_KERNELS, out);
    if (cpu) {
        const double busy = busy_share(p, total_cpu, total);
        fprintf(out, "  %d thread%s: busy %.1f%% of the step, idle or waiting %.1f%% (%.2f thread-ms a step)\n",
                p->threads, p->threads == 1 ? "" : "s", 100 * busy, 100 * (1 - busy),
                1e3 * (1 - busy) * p->threads * total / steps);
        if (waits_spin(p))
            fprintf(out, "  (OpenMP's waiting threads spin a while and count as busy; OMP_WAIT_POLICY=passive counts "
                         "them as idle)\n");
    }
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
    const double total = total_seconds(p);
    const bool cpu = p->threads > 0;
    fprintf(out, "{\"steps\": %lld, \"step_seconds\": %.9g, \"outside_ops_seconds\": %.9g, ", p->steps, total,
            total - ops_seconds(p));
    if (cpu) {
        const double total_cpu = total_cpu_seconds(p);
        fprintf(out, "\"threads\": %d, \"cpu_seconds\": %.9g, \"busy\": %.6f, \"waits_spin\": %s, ", p->threads,
                total_cpu, busy_share(p, total_cpu, total), waits_spin(p) ? "true" : "false");
    }
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
        if (p->flops[k] > 0 && p->seconds[k] > 0) fprintf(out, "%.4g", p->flops[k] / p->seconds[k] / 1e9);
        else fprintf(out, "null");
        if (cpu)
            fprintf(out, ", \"cpu_seconds\": %.9g, \"busy\": %.6f", p->cpu_seconds[k],
                    busy_share(p, p->cpu_seconds[k], p->seconds[k]));
        fputc('}', out);
    }
    fprintf(out, "]");
    if (p->kernels) {
        fputs(", \"kernels\": ", out);
        tlm_kernel_times_write_json(p->kernels, total, out);
    }
    fputc('}', out);
    return !ferror(out);
}
