#include "args.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "errmsg.h"
#include "long_options.h"

/* The option whose val is opt, as the user spells it: "--batch", "-h". */
static void spell(char *buf, size_t n, int opt, int longindex, const struct option *long_options) {
    if (longindex < 0)
        for (int k = 0; long_options[k].name; k++)
            if (long_options[k].val == opt && !long_options[k].flag) {
                longindex = k;
                break;
            }
    if (longindex >= 0) snprintf(buf, n, "--%s", long_options[longindex].name);
    else snprintf(buf, n, "-%c", opt);
}

/* An unknown long option (an abbreviation too: long_options.h), the first
 * `shown` bytes of text named, with the options its name begins. */
static int unknown_option(const cli_args *a, const char *text, size_t shown, const struct option *long_options) {
    char msg[512];
    tlm_long_option_unknown(text, shown, long_options, msg, sizeof msg);
    cli_usage_error(a->cmd, "%s", msg);
    return '?';
}

int cli_getopt(cli_args *a, const char *short_options, const struct option *long_options) {
    if (!a->started) {
        a->started = true;
        a->options_done = false;
        optind = 0;    /* glibc: start afresh on this argv */
        opterr = 0;    /* the messages are ours, on one line */
    }
    a->flag = NULL;
    a->val = NULL;
    if (!a->options_done) {
        /* "-" first: non-options come back in order as 1 (whatever
         * POSIXLY_CORRECT says); ":" next: a missing value comes back as ':'. */
        char spec[64];
        snprintf(spec, sizeof spec, "-:%s", short_options);
        int longindex = -1;
        int opt = getopt_long(a->argc, a->argv, spec, long_options, &longindex);
        a->i = optind;
        const char *abbreviation = tlm_long_option_abbreviation(opt, longindex, a->argv, long_options);
        if (abbreviation) return unknown_option(a, abbreviation, strcspn(abbreviation, "="), long_options);
        if (opt == ':') {
            spell(a->flag_text, sizeof a->flag_text, optopt, -1, long_options);
            cli_usage_error(a->cmd, "%s needs a value", a->flag_text);
            return '?';
        }
        if (opt == '?') {
            /* optopt: 0 for an unknown long option (or the prefix of
             * several), else the option's val (a known one given a value it
             * does not take) or the unknown letter. */
            const char *arg = a->argv[optind - 1];
            if (optopt == 0) return unknown_option(a, arg, strlen(arg), long_options);
            if (optopt >= 256 || strchr(short_options, optopt)) cli_usage_error(a->cmd, "`%s` takes no value", arg);
            else cli_usage_error(a->cmd, "unknown option `-%c`", optopt);
            return '?';
        }
        if (opt != -1) {
            a->val = optarg;
            if (opt != 1) {
                spell(a->flag_text, sizeof a->flag_text, opt, longindex, long_options);
                a->flag = a->flag_text;
            }
            return opt;
        }
        a->options_done = true;
    }
    if (a->i >= a->argc) return -1;
    a->val = a->argv[a->i++];   /* after "--" */
    return 1;
}

bool cli_model_path(cli_args *a, const char **model) {
    if (*model) {
        cli_usage_error(a->cmd, "more than one model given (`%s`)", a->val);
        return false;
    }
    if (!a->val[0]) {
        cli_usage_error(a->cmd, "MODEL.so is empty: it needs a path");
        return false;
    }
    *model = a->val;
    return true;
}

bool cli_path(cli_args *a, const char **path) {
    if (!a->val) return false;
    if (!a->val[0]) {
        cli_usage_error(a->cmd, "%s is empty: it needs a path", a->flag);
        return false;
    }
    if (!cli_value_not_option(a)) return false;
    *path = a->val;
    return true;
}

bool cli_output_path(cli_args *a, const char **path) {
    if (a->val && *path) {
        cli_usage_error(a->cmd, "%s given twice (`%s`, then `%s`): the command writes one output", a->flag, *path,
                        a->val);
        return false;
    }
    return cli_path(a, path);
}

/* `--ckpt --resume`: getopt takes the next word as the value whatever it
 * is, so a forgotten path would make a folder named `--resume`. */
bool cli_value_not_option(cli_args *a) {
    if (strncmp(a->val, "--", 2) != 0 || !a->val[2]) return true;
    cli_usage_error(a->cmd, "%s needs a value, not the option `%s` (a path of that name: ./%s)", a->flag, a->val,
                    a->val);
    return false;
}

/* Whether s is a plain decimal: an optional sign, digits and (a real) a
 * fraction and an exponent. strtod alone also takes hexadecimal (`0x10`
 * as 16), leading white space and "inf". */
static bool decimal_syntax(const char *s, bool integer) {
    const char *p = s + (*s == '+' || *s == '-');
    int digits = 0;
    while (isdigit((unsigned char)*p)) p++, digits++;
    if (!integer && *p == '.')
        for (p++; isdigit((unsigned char)*p); p++) digits++;
    if (!digits) return false;
    if (!integer && (*p == 'e' || *p == 'E')) {
        p += 1 + (p[1] == '+' || p[1] == '-');
        if (!isdigit((unsigned char)*p)) return false;
        while (isdigit((unsigned char)*p)) p++;
    }
    return *p == '\0';
}

/* A number's value that is not one: the option after a forgotten value
 * (`--batch --dry-run`, `--lr -o`) is said to be that, not a bad number. */
static bool number_syntax(cli_args *a, bool integer) {
    const char *v = a->val;
    if (decimal_syntax(v, integer)) return true;
    char *end;
    double parsed = strtod(v, &end);
    bool infinite = end != v && !*end && !isfinite(parsed); /* inf, -inf, nan, 1e999 */
    if (!infinite && v[0] == '-' && (isalpha((unsigned char)v[1]) || (v[1] == '-' && v[2])))
        cli_usage_error(a->cmd, "%s needs a value, not the option `%s`", a->flag, v);
    else if (integer) cli_usage_error(a->cmd, "%s: `%s` is not an integer", a->flag, v);
    else if (infinite) cli_usage_error(a->cmd, "%s: `%s` is not a finite number", a->flag, v);
    else cli_usage_error(a->cmd, "%s: `%s` is not a decimal number (digits, a point, an exponent: 3e-3)", a->flag, v);
    return false;
}

bool cli_int(cli_args *a, int64_t lo, int64_t hi, int64_t *out) {
    if (!a->val || !number_syntax(a, true)) return false;
    errno = 0;
    long long v = strtoll(a->val, NULL, 10);
    if (errno == ERANGE) { /* an integer, past int64_t's range and so past hi or below lo */
        if (hi == INT64_MAX && v > 0)
            cli_usage_error(a->cmd, "%s: `%s` is out of range (at most %lld)", a->flag, a->val, (long long)hi);
        else if (hi == INT64_MAX)
            cli_usage_error(a->cmd, "%s must be at least %lld (got %s)", a->flag, (long long)lo, a->val);
        else
            cli_usage_error(a->cmd, "%s must be between %lld and %lld (got %s)", a->flag, (long long)lo, (long long)hi,
                            a->val);
        return false;
    }
    if (v < lo || v > hi) {
        if (hi == INT64_MAX) cli_usage_error(a->cmd, "%s must be at least %lld (got %lld)", a->flag, (long long)lo, v);
        else
            cli_usage_error(a->cmd, "%s must be between %lld and %lld (got %lld)", a->flag, (long long)lo,
                            (long long)hi, v);
        return false;
    }
    *out = v;
    return true;
}

bool cli_real(cli_args *a, double lo, bool lo_open, double *out) {
    if (!a->val || !number_syntax(a, false)) return false;
    double v = strtod(a->val, NULL);
    if (!isfinite(v)) { /* past DBL_MAX: 1e999 */
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
    char msg[TLM_ERR_MSG_BYTES + 512]; /* an err.msg and the words around it */
    tlm_vformat_fit(msg, sizeof msg, fmt, ap);
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

void cli_note(const char *cmd, const char *fmt, ...) {
    char with[256];
    snprintf(with, sizeof with, "%s: note", cmd);
    va_list ap;
    va_start(ap, fmt);
    vsay(with, fmt, ap, "");
    va_end(ap);
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

const char *cli_signal_name(int sig) {
    return sig == SIGINT    ? "SIGINT"
           : sig == SIGTERM ? "SIGTERM"
           : sig == SIGHUP  ? "SIGHUP"
           : sig == SIGUSR1 ? "SIGUSR1"
                            : NULL;
}
