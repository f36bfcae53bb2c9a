#include "args.h"

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool cli_switch(cli_args *a, const char *name) {
    if (strcmp(a->argv[a->i], name) != 0) return false;
    a->flag = name;
    a->val = NULL;
    return true;
}

bool cli_option(cli_args *a, const char *name) {
    const char *arg = a->argv[a->i];
    size_t n = strlen(name);
    if (strncmp(arg, name, n) != 0 || (arg[n] != '\0' && arg[n] != '=')) return false;
    a->flag = name;
    if (arg[n] == '=') a->val = arg + n + 1;
    else if (a->i + 1 < a->argc) a->val = a->argv[++a->i];
    else {
        a->val = NULL;
        cli_usage_error(a->cmd, "%s needs a value", name);
    }
    return true;
}

bool cli_int(cli_args *a, int64_t lo, int64_t hi, int64_t *out) {
    if (!a->val) return false;
    errno = 0;
    char *end;
    long long v = strtoll(a->val, &end, 10);
    if (end == a->val || *end != '\0' || errno == ERANGE) {
        cli_usage_error(a->cmd, "%s: `%s` is not an integer", a->flag, a->val);
        return false;
    }
    if (v < lo || v > hi) {
        if (hi == INT64_MAX) cli_usage_error(a->cmd, "%s must be at least %lld (got %lld)", a->flag, (long long)lo, v);
        else cli_usage_error(a->cmd, "%s must be between %lld and %lld (got %lld)", a->flag, (long long)lo,
                             (long long)hi, v);
        return false;
    }
    *out = v;
    return true;
}

bool cli_real(cli_args *a, double lo, bool lo_open, double *out) {
    if (!a->val) return false;
    char *end;
    double v = strtod(a->val, &end);
    if (end == a->val || *end != '\0' || !isfinite(v)) {
        cli_usage_error(a->cmd, "%s: `%s` is not a finite number", a->flag, a->val);
        return false;
    }
    if (lo_open ? !(v > lo) : !(v >= lo)) {
        cli_usage_error(a->cmd, "%s must be %s %g (got %s)", a->flag, lo_open ? ">" : ">=", lo, a->val);
        return false;
    }
    *out = v;
    return true;
}

static void vsay(const char *cmd, const char *fmt, va_list ap, const char *tail) {
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    for (char *p = msg; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
    fprintf(stderr, "tlm-run %s: %s%s\n", cmd, msg, tail);
}

int cli_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsay(cmd, fmt, ap, "");
    va_end(ap);
    return 1;
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    char tail[64];
    snprintf(tail, sizeof tail, " (see `tlm-run %s --help`)", cmd);
    va_list ap;
    va_start(ap, fmt);
    vsay(cmd, fmt, ap, tail);
    va_end(ap);
    return 2;
}

int cli_cores(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}
