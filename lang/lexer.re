/* The .tlm lexer, compiled by re2c. The buffer ends in a NUL sentinel, so
 * no bounds checks are needed inside a token: a NUL before the end of the
 * buffer is reported as a stray byte. Lexical errors are reported here and a
 * stand-in token is returned so that parsing continues. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lexer.h"
#include "parser.h"
#include "utf8.h"
#include "xalloc.h"

void lexer_init(lexer *lx, tlm_session *s, int file) {
    memset(lx, 0, sizeof *lx);
    lx->session = s;
    lx->file = file;
    source *src = s->sources.files[file];
    lx->base = lx->cur = (const unsigned char *)src->text;
    lx->end = lx->base + src->len;
}

void lexer_free(lexer *lx) { free(lx->open); }

static tlm_loc span(lexer *lx, const unsigned char *b, const unsigned char *e) {
    return (tlm_loc){lx->file, (uint32_t)(b - lx->base), (uint32_t)(e - lx->base)};
}

static void push_open(lexer *lx, char c, uint32_t offset) {
    if (lx->nopen == lx->capopen) {
        lx->capopen = lx->capopen ? 2 * lx->capopen : 16;
        lx->open = tlm_xrealloc(lx->open, (size_t)lx->capopen * sizeof *lx->open);
    }
    lx->open[lx->nopen++] = (open_bracket){c, offset};
}

/* Only a matching closer pops, so a stray one leaves the note about the
 * bracket that is really open. */
static void pop_open(lexer *lx, char closer) {
    char want = closer == ')' ? '(' : closer == ']' ? '[' : '{';
    if (lx->nopen > 0 && lx->open[lx->nopen - 1].c == want) lx->nopen--;
}

/* Explains what is wrong with a malformed number such as 1__0, 1e, 12abc. */
static void bad_number(lexer *lx, const unsigned char *b, const unsigned char *e) {
    diag_engine *d = &lx->session->diag;
    tlm_loc loc = span(lx, b, e);
    int len = (int)(e - b) > 40 ? 40 : (int)(e - b);
    const char *dots = e - b > 40 ? "..." : "";
    int ndots = 0;
    for (const unsigned char *p = b; p < e; p++) ndots += *p == '.';
    for (const unsigned char *p = b; p < e; p++) {
        if (*p == '_' && (p + 1 == e || p[1] == '_' || p[1] == '.' || p[-1] == '.')) {
            diag_error(d, loc, "malformed number `%.*s%s`: `_` may only stand between digits",
                       len, (const char *)b, dots);
            return;
        }
    }
    if (ndots > 1) {
        diag_error(d, loc, "malformed number `%.*s%s`: more than one `.`", len, (const char *)b, dots);
        return;
    }
    if (e[-1] == '.') {
        diag_error(d, loc, "malformed number `%.*s%s`: a digit must follow `.`", len,
                   (const char *)b, dots);
        diag_hint(d, "write `%.*s0`", len, (const char *)b);
        return;
    }
    for (const unsigned char *p = b; p < e; p++) {
        if ((*p == 'e' || *p == 'E') && (p + 1 == e || !(p[1] >= '0' && p[1] <= '9'))) {
            diag_error(d, loc, "malformed number `%.*s%s`: the exponent has no digits", len,
                       (const char *)b, dots);
            return;
        }
    }
    diag_error(d, loc, "malformed number `%.*s%s`", len, (const char *)b, dots);
    diag_hint(d, "names start with a letter or `_`; numbers look like 12, 1_000, 0.5, 3e-4");
}

static double number_value(lexer *lx, const unsigned char *b, const unsigned char *e) {
    size_t n = (size_t)(e - b);
    char small[64], *buf = n < sizeof small ? small : tlm_xmalloc(n + 1);
    size_t k = 0;
    for (const unsigned char *p = b; p < e; p++)
        if (*p != '_') buf[k++] = (char)*p;
    buf[k] = '\0';
    errno = 0;
    double v = strtod(buf, NULL);
    if (buf != small) free(buf);
    if (errno == ERANGE || !isfinite(v)) {
        bool tiny = fabs(v) < 1.0;
        diag_error(&lx->session->diag, span(lx, b, e), "number out of range: %s",
                   tiny ? "too close to zero for a double" : "too large for a double");
        return tiny ? 0.0 : 1.0;
    }
    return v;
}

/* Comments and strings may hold bidi controls (a right-to-left name in a
 * comment), but each gets a warning, as with gcc's -Wbidi-chars: one can make
 * a line display in another order than the compiler reads it. */
static void warn_bidi_controls(lexer *lx, const unsigned char *b, const unsigned char *e, const char *where) {
    for (const unsigned char *p = b; p < e;) {
        int32_t cp;
        size_t n = utf8_unit((const char *)p, (const char *)e, &cp);
        if (utf8_is_bidi_control(cp))
            diag_warning(&lx->session->diag, span(lx, p, p + n),
                         "bidirectional control character U+%04X in %s: the line may display differently from how "
                         "it compiles",
                         (unsigned)cp, where);
        p += n;
    }
}

/* A string literal; the opening quote is at b. Strings do not span lines
 * (a line ends at \n, \r\n or a lone \r: lang/source.c). */
static const char *string_value(lexer *lx, const unsigned char *b) {
    diag_engine *d = &lx->session->diag;
    const unsigned char *p = b + 1;
    size_t cap = 32, n = 0;
    char *out = tlm_xmalloc(cap);
    for (;;) {
        unsigned c = *p;
        if (c == '"') { p++; break; }
        if (c == '\n' || c == '\r' || (c == 0 && p >= lx->end)) {
            diag_error(d, span(lx, b, p), "unterminated string");
            diag_hint(d, "strings end with `\"` on the line where they start");
            break;
        }
        if (n + 5 > cap) {      /* room for a UTF-8 sequence (4 bytes) and the NUL */
            cap *= 2;
            out = tlm_xrealloc(out, cap);
        }
        if (c == '\\') {
            int v = -1;
            switch (p[1]) {
            case 'n': v = '\n'; break;
            case 't': v = '\t'; break;
            case 'r': v = '\r'; break;
            case '\\': v = '\\'; break;
            case '"': v = '"'; break;
            }
            /* A string is a path or a variant's name, and neither can hold a
             * NUL: it would cut the string short without a word. */
            if (p[1] == '0') {
                diag_error(d, span(lx, p, p + 2), "a string cannot hold a NUL byte (`\\0`)");
                p += 2;
                continue;
            }
            if (v >= 0) {
                out[n++] = (char)v;
                p += 2;
                continue;
            }
            if (p[1] == '\n' || p[1] == '\r' || (p[1] == 0 && p + 1 >= lx->end)) { p++; continue; }
            /* Past the whole character escaped, so that `\\é` is one error,
             * not a second one for the rest of its UTF-8 sequence. */
            int32_t ecp;
            size_t ek = utf8_unit((const char *)p + 1, (const char *)lx->end, &ecp);
            bool shown = ecp >= 0 && !utf8_is_unprintable(ecp);
            diag_error(d, span(lx, p, p + 1 + ek), "unknown escape sequence `\\%.*s`", shown ? (int)ek : 1,
                       shown ? (const char *)p + 1 : "?");
            diag_hint(d, "the escapes are \\n \\t \\r \\\\ \\\"");
            p += 1 + ek;
            continue;
        }
        if (c == 0) {
            diag_error(d, span(lx, p, p + 1), "NUL byte inside a string");
            p++;
            continue;
        }
        if (c >= 0x80) {
            /* Strings reach --plan's JSON, which must be UTF-8: a stray
             * byte is refused here rather than written there. */
            int32_t cp;
            size_t k = utf8_unit((const char *)p, (const char *)lx->end, &cp);
            if (cp < 0) {
                diag_error(d, span(lx, p, p + 1), "byte 0x%02X in a string is not valid UTF-8", c);
                p++;
                continue;
            }
            warn_bidi_controls(lx, p, p + k, "a string");
            memcpy(out + n, p, k);
            n += k;
            p += k;
            continue;
        }
        out[n++] = (char)c;
        p++;
    }
    lx->cur = p;
    const char *s = arena_strndup(&lx->session->arena, out, n);
    free(out);
    return s;
}

static void block_comment(lexer *lx, const unsigned char *b) {
    const unsigned char *p = b + 2;
    const void *close = memmem(p, (size_t)(lx->end - p), "*/", 2);
    warn_bidi_controls(lx, p, close ? (const unsigned char *)close : lx->end, "a comment");
    if (!close) {
        diag_error(&lx->session->diag, span(lx, b, b + 2), "unterminated comment");
        diag_hint(&lx->session->diag, "block comments end with `*/`");
        lx->cur = lx->end;
        return;
    }
    lx->cur = (const unsigned char *)close + 2;
}

static void stray(lexer *lx, const unsigned char *b) {
    diag_engine *d = &lx->session->diag;
    int32_t cp;
    size_t n = utf8_unit((const char *)b, (const char *)lx->end, &cp);
    lx->cur = b + n;
    tlm_loc loc = span(lx, b, b + n);
    if (cp < 0) {
        diag_error(d, loc, "stray byte 0x%02X (not valid UTF-8)", *b);
    } else if (cp == 0) {
        diag_error(d, loc, "stray NUL byte");
    } else if (cp < 0x20 || cp == 0x7F) {
        diag_error(d, loc, "stray control character 0x%02X", (unsigned)cp);
    } else if (cp < 0x80) {
        diag_error(d, loc, "stray `%c` in program", (char)cp);
        if (cp == '#') diag_hint(d, "comments start with `//`");
        if (cp == '\'') diag_hint(d, "strings are written with double quotes");
    } else if (utf8_is_bidi_control(cp)) {
        diag_error(d, loc, "stray bidirectional control character U+%04X in program", (unsigned)cp);
    } else if (utf8_is_unprintable(cp)) {
        /* not quoted: the character would be invisible, or move the cursor */
        diag_error(d, loc, "stray invisible character U+%04X in program", (unsigned)cp);
        if (cp == 0xFEFF) diag_hint(d, "a byte-order mark may only start a file");
    } else {
        diag_error(d, loc, "stray U+%04X `%.*s` in program", (unsigned)cp, (int)n, (const char *)b);
        if (cp == 0x201C || cp == 0x201D) diag_hint(d, "use a plain `\"` for strings");
        if (cp == 0x2212) diag_hint(d, "use a plain `-` for minus");
    }
}

int yylex(YYSTYPE *lval, tlm_loc *lloc, lexer *lx) {
    lx->prev_end = lx->last_end;
    if (lx->start_token) {
        int t = lx->start_token;
        lx->start_token = 0;
        *lloc = span(lx, lx->cur, lx->cur);
        return t;
    }
    for (;;) {
        const unsigned char *tok = lx->cur, *YYMARKER;
        int t;
        if (lx->session->diag.stopped) { lx->cur = lx->end; tok = lx->end; t = END; goto done; }
        /*!re2c
            re2c:define:YYCTYPE = "unsigned char";
            re2c:define:YYCURSOR = "lx->cur";
            re2c:yyfill:enable = 0;

            digits    = [0-9]+ ("_" [0-9]+)*;
            exponent  = [eE] [+-]? digits;
            number    = digits ("." digits)? exponent? | "." digits exponent?;
            badnumber = [0-9] [0-9A-Za-z_.]* | "." [0-9] [0-9A-Za-z_.]*;
            ident     = [A-Za-z_] [A-Za-z0-9_]*;

            "\x00"    { if (tok >= lx->end) { lx->cur = lx->end; t = END; goto done; }
                        stray(lx, tok); continue; }
            [ \t\r\n\f\v]+     { continue; }
            "//" [^\n\r\x00]* { warn_bidi_controls(lx, tok + 2, lx->cur, "a comment");
                                continue; }  /* to the line's end: \n, \r\n or a lone \r */
            "/*"      { block_comment(lx, tok); continue; }

            number    { lval->number = number_value(lx, tok, lx->cur); t = NUMBER; goto done; }
            badnumber { bad_number(lx, tok, lx->cur); lval->number = 1.0; t = NUMBER; goto done; }

            "use"      { t = USE; goto done; }
            "param"    { t = PARAM; goto done; }
            "schedule" { t = SCHEDULE; goto done; }
            "model"    { t = MODEL; goto done; }
            "train"    { t = TRAIN; goto done; }
            "study"    { t = STUDY; goto done; }
            "in"       { t = IN; goto done; }
            ident      { lval->text = intern(&lx->session->names, (const char *)tok,
                                             (size_t)(lx->cur - tok));
                         t = IDENT; goto done; }
            ["]        { lval->text = string_value(lx, tok); t = STRING; goto done; }

            "<="  { t = LE; goto done; }
            ">="  { t = GE; goto done; }
            "=="  { t = EQ; goto done; }
            "!="  { t = NE; goto done; }
            "&&"  { t = ANDAND; goto done; }
            "||"  { t = OROR; goto done; }
            "&" | "|" {
                diag_error(&lx->session->diag, span(lx, tok, lx->cur),
                           "there is no `%c` operator; did you mean `%c%c`?", *tok, *tok, *tok);
                t = *tok == '&' ? ANDAND : OROR; goto done; }
            "**" | "^" {
                diag_error(&lx->session->diag, span(lx, tok, lx->cur),
                           "there is no `%.*s` operator", (int)(lx->cur - tok), (const char *)tok);
                diag_hint(&lx->session->diag, "raise to a power with pow(x, y)");
                t = '*'; goto done; }
            [([{]  { push_open(lx, (char)*tok, (uint32_t)(tok - lx->base)); t = *tok; goto done; }
            [)\]}]  { pop_open(lx, (char)*tok); t = *tok; goto done; }
            [-+*/%?:=<>!,;.]  { t = *tok; goto done; }

            *     { stray(lx, tok); continue; }
        */
    done:
        *lloc = span(lx, tok, lx->cur);
        lx->last_end = (uint32_t)(lx->cur - lx->base);
        return t;
    }
}
