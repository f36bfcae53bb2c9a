#include "diag.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "utf8.h"
#include "xalloc.h"

enum { WINDOW = 100 };      /* units of a long line shown each side of the caret */

#define BOLD "\033[1m"
#define RED "\033[1;31m"
#define MAG "\033[1;35m"
#define CYAN "\033[1;36m"
#define GREEN "\033[1;32m"
#define RESET "\033[0m"

void diag_init(diag_engine *d, source_table *sources, FILE *out) {
    memset(d, 0, sizeof *d);
    d->sources = sources;
    d->out = out;
    d->max_errors = 20;
}

static const char *col(diag_engine *d, const char *code) { return d->color ? code : ""; }

/* Prints one unit of source text so that it takes one column. */
static void put_unit(FILE *out, const char *p, size_t n, int32_t cp) {
    if (cp == '\t') fputc(' ', out);
    else if (cp < 0 || utf8_is_unprintable(cp)) fputc('?', out);
    else fwrite(p, 1, n, out);
}

/* Writes a message, with each unprintable character (a control, a bidi
 * control, ...) as \uXXXX: a message may quote source text, a string's
 * value or a path, and one such character could hide or reverse the rest of
 * the line on a terminal. */
static void put_escaped(FILE *out, const char *text) {
    const char *end = text + strlen(text);
    for (const char *p = text; p < end;) {
        int32_t cp;
        size_t n = utf8_unit(p, end, &cp);
        if (cp >= 0 && utf8_is_unprintable(cp)) fprintf(out, "\\u%04X", (unsigned)cp);
        else fwrite(p, 1, n, out);
        p += n;
    }
}

static void print_snippet(diag_engine *d, tlm_loc loc, const char *mark_color) {
    source *s = d->sources->files[loc.file];
    unsigned line, c0, eline, c1;
    source_position(s, loc.begin, &line, &c0);
    source_position(s, loc.end > loc.begin ? loc.end : loc.begin, &eline, &c1);
    size_t len;
    const char *text = source_line(s, line, &len), *end = text + len;
    size_t units = 0;
    for (const char *p = text; p < end; units++) {
        int32_t cp;
        p += utf8_unit(p, end, &cp);
    }
    if (eline != line) c1 = (unsigned)units + 1;               /* underline to end of line */
    if (c1 <= c0) c1 = c0 + 1;

    /* Very long lines (minified or generated input) are shown as a window. */
    size_t from = 0, to = units;
    if (units > 2 * WINDOW) {
        from = c0 - 1 > WINDOW ? c0 - 1 - WINDOW : 0;
        to = from + 2 * WINDOW < units ? from + 2 * WINDOW : units;
    }
    char gutter[16];
    int gw = snprintf(gutter, sizeof gutter, "%u", line);
    fprintf(d->out, " %s%s |%s ", col(d, BOLD), gutter, col(d, RESET));
    if (from > 0) fputs("...", d->out);
    size_t u = 0;
    for (const char *p = text; p < end && u < to; u++) {
        int32_t cp;
        size_t n = utf8_unit(p, end, &cp);
        if (u >= from) put_unit(d->out, p, n, cp);
        p += n;
    }
    if (to < units) fputs("...", d->out);
    fputc('\n', d->out);
    fprintf(d->out, " %*s %s|%s ", gw, "", col(d, BOLD), col(d, RESET));
    if (from > 0) fputs("   ", d->out);
    for (size_t i = from + 1; i < c0; i++) fputc(' ', d->out);
    fputs(col(d, mark_color), d->out);
    fputc('^', d->out);
    for (size_t i = c0 + 1; i < c1 && i <= to; i++) fputc('~', d->out);
    fputs(col(d, RESET), d->out);
    fputc('\n', d->out);
}

void diag_free(diag_engine *d) {
    free(d->seen);
    d->seen = NULL;
    d->nseen = d->capseen = 0;
}

/* Returns true if this exact diagnostic was reported before; remembers it. */
static bool seen_before(diag_engine *d, diag_level level, tlm_loc loc, const char *msg) {
    uint64_t h = 1469598103934665603ull;
    uint64_t parts[4] = {(uint64_t)level, (uint64_t)(uint32_t)loc.file, loc.begin, loc.end};
    for (int i = 0; i < 4; i++) h = (h ^ parts[i]) * 1099511628211ull;
    for (const char *c = msg; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
    if (h == 0) h = 1;
    if (2 * (d->nseen + 1) > d->capseen) {
        size_t cap = d->capseen ? 2 * d->capseen : 64;
        uint64_t *slots = tlm_xcalloc(cap, sizeof *slots);
        for (size_t i = 0; i < d->capseen; i++) {
            if (!d->seen[i]) continue;
            size_t j = d->seen[i] & (cap - 1);
            while (slots[j]) j = (j + 1) & (cap - 1);
            slots[j] = d->seen[i];
        }
        free(d->seen);
        d->seen = slots;
        d->capseen = cap;
    }
    size_t j = h & (d->capseen - 1);
    while (d->seen[j]) {
        if (d->seen[j] == h) return true;
        j = (j + 1) & (d->capseen - 1);
    }
    d->seen[j] = h;
    d->nseen++;
    return false;
}

static void vreport(diag_engine *d, diag_level level, tlm_loc loc, const char *fmt, va_list ap) {
    char msg[8192]; /* a path of PATH_MAX bytes and the words around it */
    int used = level != DIAG_NOTE && d->context ? snprintf(msg, sizeof msg, "%s", d->context) : 0;
    if (used < 0 || (size_t)used >= sizeof msg) used = 0;
    vsnprintf(msg + used, sizeof msg - (size_t)used, fmt, ap);
    if (level == DIAG_NOTE) {
        if (d->last_dropped) return;
    } else {
        if (seen_before(d, level, loc, msg)) {
            d->last_dropped = true;
            return;
        }
        if (d->stopped) { /* past the cap: neither shown nor counted, so the summary counts what was shown */
            d->last_dropped = true;
            return;
        }
        if (level == DIAG_ERROR) d->errors++, d->last_error_loc = loc;
        else d->warnings++;
        d->last_dropped = !d->out;
        if (level == DIAG_ERROR && d->max_errors && d->errors > d->max_errors) {
            d->stopped = true;
            d->last_dropped = true;
            d->errors--;            /* this one is not shown; don't count it */
            if (d->out) fprintf(d->out, "%sfatal error:%s too many errors, stopping now\n", col(d, RED), col(d, RESET));
            return;
        }
    }
    if (!d->out) return;
    static const char *names[] = {"error", "warning", "note"};
    const char *colors[] = {RED, MAG, CYAN};
    bool has_loc = loc.file >= 0 && loc.file < d->sources->count;
    if (has_loc) {
        source *s = d->sources->files[loc.file];
        unsigned line, c;
        source_position(s, loc.begin, &line, &c);
        fputs(col(d, BOLD), d->out);
        put_escaped(d->out, s->name); /* a file's name is the user's text too */
        fprintf(d->out, ":%u:%u:%s ", line, c, col(d, RESET));
    }
    fprintf(d->out, "%s%s:%s %s", col(d, colors[level]), names[level], col(d, RESET), col(d, BOLD));
    put_escaped(d->out, msg);
    fprintf(d->out, "%s\n", col(d, RESET));
    if (has_loc) print_snippet(d, loc, level == DIAG_NOTE ? CYAN : GREEN);
}

#define REPORT(level)                \
    va_list ap;                      \
    va_start(ap, fmt);               \
    vreport(d, level, loc, fmt, ap); \
    va_end(ap)

void diag_error(diag_engine *d, tlm_loc loc, const char *fmt, ...) { REPORT(DIAG_ERROR); }
void diag_warning(diag_engine *d, tlm_loc loc, const char *fmt, ...) { REPORT(DIAG_WARNING); }
void diag_note(diag_engine *d, tlm_loc loc, const char *fmt, ...) { REPORT(DIAG_NOTE); }

void diag_hint(diag_engine *d, const char *fmt, ...) {
    if (d->last_dropped || !d->out) return;
    char msg[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(d->out, "   %s= hint:%s ", col(d, GREEN), col(d, RESET));
    put_escaped(d->out, msg);
    fputc('\n', d->out);
}

void diag_summary(diag_engine *d) {
    if (!d->out || (!d->errors && !d->warnings)) return;
    if (d->errors && d->warnings)
        fprintf(d->out, "%d error%s and %d warning%s.\n", d->errors, d->errors == 1 ? "" : "s", d->warnings,
                d->warnings == 1 ? "" : "s");
    else if (d->errors) fprintf(d->out, "%d error%s.\n", d->errors, d->errors == 1 ? "" : "s");
    else fprintf(d->out, "%d warning%s.\n", d->warnings, d->warnings == 1 ? "" : "s");
}
