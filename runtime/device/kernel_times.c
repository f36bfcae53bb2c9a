/* Each device kernel's and GEMM's time: kernel_times.h. */
#include "kernel_times.h"

#include <ctype.h>
#include <string.h>

/* The name with every "_w<digits>" (an MLP kernel's width) as "_w*". */
static void aggregated(const char *name, char out[TLM_KERNEL_NAME_MAX]) {
    size_t o = 0;
    for (const char *c = name; *c && o + 1 < TLM_KERNEL_NAME_MAX;) {
        if (c[0] == '_' && c[1] == 'w' && isdigit((unsigned char)c[2])) {
            if (o + 3 >= TLM_KERNEL_NAME_MAX) break;
            memcpy(out + o, "_w*", 3), o += 3;
            for (c += 2; isdigit((unsigned char)*c); c++) {}
            continue;
        }
        out[o++] = *c++;
    }
    out[o] = '\0';
}

void tlm_kernel_times_add(tlm_kernel_times *t, const char *what, double seconds, double flops) {
    char key[TLM_KERNEL_NAME_MAX];
    aggregated(what, key);
    tlm_kernel_time *row = NULL;
    for (int i = 0; i < t->n && !row; i++)
        if (t->rows[i].op == t->op && !strcmp(t->rows[i].what, key)) row = &t->rows[i];
    if (!row && t->n < TLM_KERNEL_TIMES_MAX) {
        row = &t->rows[t->n++];
        *row = (tlm_kernel_time){.op = t->op};
        memcpy(row->what, key, sizeof key);
    }
    if (!row) { /* full: the rest in one row */
        row = &t->rows[TLM_KERNEL_TIMES_MAX];
        if (!row->calls) *row = (tlm_kernel_time){.op = "(any op)", .what = "(others)"};
    }
    row->calls++;
    row->seconds += seconds;
    row->flops += flops;
}

int tlm_kernel_times_order(const tlm_kernel_times *t, int order[TLM_KERNEL_TIMES_MAX + 1]) {
    int n = 0;
    for (int i = 0; i <= TLM_KERNEL_TIMES_MAX; i++)
        if (t->rows[i].calls) order[n++] = i;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && t->rows[order[j]].seconds > t->rows[order[j - 1]].seconds; j--) {
            int k = order[j];
            order[j] = order[j - 1];
            order[j - 1] = k;
        }
    return n;
}

void tlm_kernel_times_print(const tlm_kernel_times *t, double steps, double total, int shown, FILE *out) {
    int order[TLM_KERNEL_TIMES_MAX + 1], n = tlm_kernel_times_order(t, order);
    if (n == 0 || steps <= 0 || total <= 0) return;
    fprintf(out, "  device kernels and GEMMs, each waited for (op: what ran; the MLP's widths as _w*):\n");
    fprintf(out, "  %-58s %8s %10s %7s %9s\n", "op: kernel", "calls", "ms/step", "share", "GFLOP/s");
    double rest = 0;
    long long rest_calls = 0;
    for (int i = 0; i < n; i++) {
        const tlm_kernel_time *r = &t->rows[order[i]];
        if (i >= shown) {
            rest += r->seconds, rest_calls += r->calls;
            continue;
        }
        char label[TLM_KERNEL_NAME_MAX + 40], rate[16] = "";
        snprintf(label, sizeof label, "%s: %s", r->op ? r->op : "outside the ops", r->what);
        if (r->flops > 0 && r->seconds > 0) snprintf(rate, sizeof rate, "%.1f", r->flops / r->seconds / 1e9);
        fprintf(out, "  %-58s %8lld %10.3f %6.1f%% %9s\n", label, r->calls, 1e3 * r->seconds / steps,
                100 * r->seconds / total, rate);
    }
    if (n > shown)
        fprintf(out, "  (%d more rows: %lld calls, %.3f ms a step, %.1f%%)\n", n - shown, rest_calls,
                1e3 * rest / steps, 100 * rest / total);
}

/* s as a JSON string (names are plain ASCII; quotes and controls escaped) */
static void json_string(const char *s, FILE *out) {
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fprintf(out, "\\%c", *s);
        else if ((unsigned char)*s < 0x20) fprintf(out, "\\u%04x", (unsigned char)*s);
        else fputc(*s, out);
    }
    fputc('"', out);
}

bool tlm_kernel_times_write_json(const tlm_kernel_times *t, double total, FILE *out) {
    int order[TLM_KERNEL_TIMES_MAX + 1], n = tlm_kernel_times_order(t, order);
    fputc('[', out);
    for (int i = 0; i < n; i++) {
        const tlm_kernel_time *r = &t->rows[order[i]];
        fputs(i ? ", {\"op\": " : "{\"op\": ", out);
        if (r->op) json_string(r->op, out);
        else fputs("null", out);
        fputs(", \"kernel\": ", out);
        json_string(r->what, out);
        fprintf(out, ", \"calls\": %lld, \"seconds\": %.9g, \"share\": %.6f, \"gflops\": ", r->calls, r->seconds,
                total > 0 ? r->seconds / total : 0);
        if (r->flops > 0 && r->seconds > 0) fprintf(out, "%.4g}", r->flops / r->seconds / 1e9);
        else fputs("null}", out);
    }
    fputc(']', out);
    return !ferror(out);
}
