/* The training-settings table (tlm_train_settings.h) as data, and the few
 * functions every view of it shares: access by row, ranges, defaults,
 * formatting, and the train { } listing of tlm-run info. */
#include "tlm_train_settings.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "numfmt.h"

/* What each kind token of the table stands for. */
#define KIND_INT TLM_TS_INT
#define KIND_SEED TLM_TS_SEED
#define KIND_REAL TLM_TS_REAL
#define KIND_REAL_GT TLM_TS_REAL
#define KIND_OPTIMIZER TLM_TS_CHOICE
#define KIND_LR_SCHEDULE TLM_TS_CHOICE
#define CHOICES_INT NULL
#define CHOICES_SEED NULL
#define CHOICES_REAL NULL
#define CHOICES_REAL_GT NULL
#define CHOICES_OPTIMIZER &tlm_optimizer_enum
#define CHOICES_LR_SCHEDULE &tlm_lr_enum

#define ROW_(field, flag, kind, lo, hi, def, def_text, trajectory, help, call, arg, for_choices) \
    {#field,                                                                                     \
     flag,                                                                                       \
     KIND_##kind,                                                                                \
     offsetof(tlm_abi_train, field),                                                             \
     lo,                                                                                         \
     hi,                                                                                         \
     TLM_TS_OPEN_##kind,                                                                         \
     TLM_TS_RANGE_##kind(lo, hi),                                                                \
     CHOICES_##kind,                                                                             \
     def,                                                                                        \
     def_text,                                                                                   \
     trajectory,                                                                                 \
     help,                                                                                       \
     call,                                                                                       \
     arg,                                                                                        \
     for_choices},
#define SETTING_ROW_(field, flag, kind, lo, hi, def, def_text, trajectory, help) \
    ROW_(field, flag, kind, lo, hi, def, def_text, trajectory, help, NULL, NULL, 0u)
#define ARGUMENT_ROW_(field, flag, kind, lo, hi, def, def_text, trajectory, help, call, arg, for_choices) \
    ROW_(field, flag, kind, lo, hi, def, def_text, trajectory, help, #call, arg, for_choices)

const tlm_train_setting tlm_train_settings[TLM_TRAIN_NSETTINGS] = {TLM_TRAIN_SETTINGS(SETTING_ROW_, ARGUMENT_ROW_)};

const tlm_train_setting *tlm_train_find(const char *key) {
    for (int i = 0; i < TLM_TRAIN_NSETTINGS; i++)
        if (strcmp(tlm_train_settings[i].key, key) == 0) return &tlm_train_settings[i];
    return NULL;
}

const tlm_train_setting *tlm_train_call_of(const tlm_train_setting *s) {
    return s->call ? tlm_train_find(s->call) : NULL;
}

bool tlm_train_applies(const tlm_train_setting *s, const tlm_abi_train *t) {
    const tlm_train_setting *call = tlm_train_call_of(s);
    if (!call) return true;
    double choice = tlm_train_get(t, call);
    return choice >= 0 && choice < 32 && (s->for_choices & (1u << (unsigned)choice)) != 0;
}

double tlm_train_get(const tlm_abi_train *t, const tlm_train_setting *s) {
    const char *at = (const char *)t + s->offset;
    switch (s->kind) {
    case TLM_TS_INT: {
        int64_t v;
        memcpy(&v, at, sizeof v);
        return (double)v;
    }
    case TLM_TS_SEED: {
        uint64_t v;
        memcpy(&v, at, sizeof v);
        return (double)v;
    }
    case TLM_TS_REAL: {
        double v;
        memcpy(&v, at, sizeof v);
        return v;
    }
    case TLM_TS_CHOICE: {
        uint32_t v;
        memcpy(&v, at, sizeof v);
        return (double)v;
    }
    }
    return 0;
}

void tlm_train_set(tlm_abi_train *t, const tlm_train_setting *s, double v) {
    char *at = (char *)t + s->offset;
    switch (s->kind) {
    case TLM_TS_INT: {
        int64_t x = (int64_t)v;
        memcpy(at, &x, sizeof x);
        break;
    }
    case TLM_TS_SEED: {
        uint64_t x = (uint64_t)v;
        memcpy(at, &x, sizeof x);
        break;
    }
    case TLM_TS_REAL: memcpy(at, &v, sizeof v); break;
    case TLM_TS_CHOICE: {
        uint32_t x = (uint32_t)v;
        memcpy(at, &x, sizeof x);
        break;
    }
    }
}

bool tlm_train_in_range(const tlm_train_setting *s, double v) {
    if (s->kind == TLM_TS_CHOICE) return v >= 0 && v < s->choices->count && v == (double)(int)v;
    return (s->lo_open ? v > s->lo : v >= s->lo) && !tlm_train_zero_as_float(s, v) && v <= s->hi;
}

bool tlm_real_at_bound_as_float(const char *name, double lo, bool lo_open, double v) {
    /* a closed bound is a value like any other (a weight_decay or min_lr
     * of 0), but grad_clip's 0 is "off" */
    const bool bound_means = lo_open || !strcmp(name, "grad_clip");
    return bound_means && v > lo && (float)v <= (float)lo;
}

bool tlm_train_zero_as_float(const tlm_train_setting *s, double v) {
    return s->kind == TLM_TS_REAL && tlm_real_at_bound_as_float(s->key, s->lo, s->lo_open, v);
}

void tlm_train_defaults(tlm_abi_train *t, int64_t model_context) {
    memset(t, 0, sizeof *t);
    for (int i = 0; i < TLM_TRAIN_NSETTINGS; i++)
        tlm_train_set(t, &tlm_train_settings[i], tlm_train_settings[i].default_value);
    t->context = model_context;
}

/* A tenth of lr as a decimal: lr's shortest digits with the exponent one
 * lower, read back. lr / 10 in binary is 0.00030000000000000003 for lr
 * 0.003, which info and --dry-run would print as such. The decimal tenth is
 * within a double's ulp of it; the trainer's schedule holds min_lr as a
 * float, and the two round to the same float unless a float midpoint falls
 * between them (none did for 200,000 random lr of up to 8 digits), so the
 * runs' numbers stay those of lr / 10. */
static double decimal_tenth(double lr) {
    char buf[64];
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(buf, sizeof buf, "%.*e", digits - 1, lr);
        if (strtod(buf, NULL) == lr) break;
    }
    char *e = strchr(buf, 'e');
    if (!e) return lr / 10; /* not finite: the range checks refuse lr */
    snprintf(e, sizeof buf - (size_t)(e - buf), "e%d", atoi(e + 1) - 1);
    return strtod(buf, NULL);
}

void tlm_train_resolve_defaults(tlm_abi_train *t) {
    if (t->min_lr == -1) t->min_lr = decimal_tenth(t->lr); /* other negatives: damage, for the range checks */
}

bool tlm_train_decay_rises(const tlm_abi_train *t) {
    return tlm_train_applies(tlm_train_find("min_lr"), t) && t->min_lr > t->lr;
}

const char *tlm_train_format(char *buf, size_t n, const tlm_train_setting *s, const tlm_abi_train *t) {
    const char *at = (const char *)t + s->offset;
    switch (s->kind) {
    case TLM_TS_INT: {
        int64_t v;
        memcpy(&v, at, sizeof v);
        snprintf(buf, n, "%lld", (long long)v);
        break;
    }
    case TLM_TS_SEED: {
        uint64_t v;
        memcpy(&v, at, sizeof v);
        snprintf(buf, n, "%llu", (unsigned long long)v);
        break;
    }
    case TLM_TS_REAL: fmt_real(buf, n, tlm_train_get(t, s)); break;
    case TLM_TS_CHOICE: snprintf(buf, n, "%s", tlm_enum_name(s->choices, (unsigned)tlm_train_get(t, s))); break;
    }
    return buf;
}

/* ---- tlm-run info's listing ---- */

/* `key = value;`, a call written out with the arguments its choice takes;
 * rows that share an argument name are one tuple. */
static void statement(char *buf, size_t n, const tlm_train_setting *s, const tlm_abi_train *t) {
    char v[64];
    size_t len = (size_t)snprintf(buf, n, "%s = %s", s->key, tlm_train_format(v, sizeof v, s, t));
    if (s->kind == TLM_TS_CHOICE) {
        const char *sep = "(";
        for (int i = 0; i < TLM_TRAIN_NSETTINGS && len < n; i++) {
            const tlm_train_setting *a = &tlm_train_settings[i];
            if (!a->call || strcmp(a->call, s->key) != 0 || !tlm_train_applies(a, t)) continue;
            bool first = i == 0 || !tlm_train_settings[i - 1].arg || strcmp(tlm_train_settings[i - 1].arg, a->arg);
            bool last = i + 1 == TLM_TRAIN_NSETTINGS || !tlm_train_settings[i + 1].arg ||
                        strcmp(tlm_train_settings[i + 1].arg, a->arg);
            bool tuple = !(first && last);
            if (first) len += (size_t)snprintf(buf + len, n - len, "%s%s = %s", sep, a->arg, tuple ? "(" : "");
            else len += (size_t)snprintf(buf + len, n - len, ", ");
            if (len < n)
                len += (size_t)snprintf(buf + len, n - len, "%s%s", tlm_train_format(v, sizeof v, a, t),
                                        tuple && last ? ")" : "");
            sep = ", ";
        }
        if (*sep == ',' && len < n) len += (size_t)snprintf(buf + len, n - len, ")");
    }
    if (len < n) snprintf(buf + len, n - len, ";");
}

void tlm_train_print(FILE *out, const char *title, const tlm_abi_train *t) {
    enum { WIDTH = 80, INDENT = 2 };
    fprintf(out, "%s:\n", title);
    int column = 0;
    for (int i = 0; i < TLM_TRAIN_NSETTINGS; i++) {
        const tlm_train_setting *s = &tlm_train_settings[i];
        if (s->call) continue;
        char text[512];
        statement(text, sizeof text, s, t);
        int len = (int)strlen(text);
        /* A call has a line of its own; the other statements share lines. */
        bool alone = s->kind == TLM_TS_CHOICE;
        if (column > 0 && (alone || column + 1 + len > WIDTH)) {
            fputc('\n', out);
            column = 0;
        }
        column += column ? fprintf(out, " %s", text) : fprintf(out, "%*s%s", INDENT, "", text);
        if (alone) {
            fputc('\n', out);
            column = 0;
        }
    }
    if (column > 0) fputc('\n', out);
}
