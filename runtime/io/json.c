/* A small strict JSON reader (recursive descent, bounded depth) and a
 * string-buffer writer. See json.h for what is accepted. */
#include "tlm_rt/json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct parser {
    const char *start, *p, *end;
    tlm_err *err;
    bool failed;
} parser;

static void fail(parser *ps, const char *what) {
    if (ps->failed) return;
    ps->failed = true;
    tlm_fail(ps->err, "JSON: %s at byte %zu", what, (size_t)(ps->p - ps->start));
}

static void skip_ws(parser *ps) {
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')) ps->p++;
}

static bool literal(parser *ps, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0) {
        fail(ps, "invalid literal");
        return false;
    }
    ps->p += n;
    return true;
}

/* ---- numbers ----------------------------------------------------------- */

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static bool parse_number(parser *ps, tlm_json *out) {
    const char *s = ps->p;
    const char *q = s;
    bool integral = true;
    if (q < ps->end && *q == '-') q++;
    if (q >= ps->end || !is_digit(*q)) {
        fail(ps, "invalid number");
        return false;
    }
    if (*q == '0') {
        q++;
        if (q < ps->end && is_digit(*q)) {
            fail(ps, "leading zero in number");
            return false;
        }
    } else {
        while (q < ps->end && is_digit(*q)) q++;
    }
    if (q < ps->end && *q == '.') {
        integral = false;
        q++;
        if (q >= ps->end || !is_digit(*q)) {
            ps->p = q;
            fail(ps, "digit expected after '.'");
            return false;
        }
        while (q < ps->end && is_digit(*q)) q++;
    }
    if (q < ps->end && (*q == 'e' || *q == 'E')) {
        integral = false;
        q++;
        if (q < ps->end && (*q == '+' || *q == '-')) q++;
        if (q >= ps->end || !is_digit(*q)) {
            ps->p = q;
            fail(ps, "digit expected in exponent");
            return false;
        }
        while (q < ps->end && is_digit(*q)) q++;
    }
    size_t n = (size_t)(q - s);
    /* strtod needs a terminated copy: the input need not be terminated */
    char small[64];
    char *buf = n < sizeof small ? small : malloc(n + 1);
    if (!buf) {
        fail(ps, "out of memory");
        return false;
    }
    memcpy(buf, s, n);
    buf[n] = '\0';
    out->type = TLM_JSON_NUMBER;
    out->number = strtod(buf, NULL);
    if (buf != small) free(buf);
    if (integral) {
        /* exact int64, with overflow detection (offsets need every bit) */
        const char *d = s;
        bool neg = *d == '-';
        if (neg) d++;
        uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
        uint64_t v = 0;
        bool fits = true;
        for (; d < q; d++) {
            uint64_t digit = (uint64_t)(*d - '0');
            if (v > (limit - digit) / 10) {
                fits = false;
                break;
            }
            v = v * 10 + digit;
        }
        if (fits) {
            out->is_int = true;
            out->integer = neg ? (int64_t)(0 - v) : (int64_t)v;
        }
    }
    ps->p = q;
    return true;
}

/* ---- strings ----------------------------------------------------------- */

static int hex4(const char *s) {
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

static size_t put_utf8(char *o, unsigned cp) {
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Length of the valid UTF-8 sequence at s (at most n bytes), 0 if invalid:
 * rejects overlong forms, surrogates and code points above U+10FFFF. */
static size_t utf8_seq(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t len;
    unsigned cp, min;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1F, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, cp = c & 0x0F, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07, min = 0x10000;
    else return 0;
    if (n < len) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

/* Parses a string at ps->p (on the opening quote) into a fresh buffer. */
static char *parse_string(parser *ps, size_t *len_out) {
    const char *s = ++ps->p; /* after the quote */
    /* find the closing quote to size the buffer: the decoded string is
     * never longer than its source */
    const char *q = s;
    while (q < ps->end && *q != '"') q += (*q == '\\' && q + 1 < ps->end) ? 2 : 1;
    if (q >= ps->end) {
        fail(ps, "unterminated string");
        return NULL;
    }
    char *buf = malloc((size_t)(q - s) + 1);
    if (!buf) {
        fail(ps, "out of memory");
        return NULL;
    }
    size_t o = 0;
    while (ps->p < q) {
        unsigned char c = (unsigned char)*ps->p;
        if (c < 0x20) {
            fail(ps, "control character in string");
            goto bad;
        }
        if (c != '\\') {
            size_t n = utf8_seq((const unsigned char *)ps->p, (size_t)(q - ps->p));
            if (n == 0) {
                fail(ps, "invalid UTF-8 in string");
                goto bad;
            }
            memcpy(buf + o, ps->p, n);
            o += n;
            ps->p += n;
            continue;
        }
        ps->p++; /* the backslash; q guarantees one more byte */
        char e = *ps->p++;
        switch (e) {
        case '"': buf[o++] = '"'; break;
        case '\\': buf[o++] = '\\'; break;
        case '/': buf[o++] = '/'; break;
        case 'b': buf[o++] = '\b'; break;
        case 'f': buf[o++] = '\f'; break;
        case 'n': buf[o++] = '\n'; break;
        case 'r': buf[o++] = '\r'; break;
        case 't': buf[o++] = '\t'; break;
        case 'u': {
            int cp = q - ps->p >= 4 ? hex4(ps->p) : -1;
            if (cp < 0) {
                fail(ps, "invalid \\u escape");
                goto bad;
            }
            ps->p += 4;
            if (cp >= 0xDC00 && cp <= 0xDFFF) {
                fail(ps, "lone low surrogate in \\u escape");
                goto bad;
            }
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                int lo = q - ps->p >= 6 && ps->p[0] == '\\' && ps->p[1] == 'u' ? hex4(ps->p + 2) : -1;
                if (lo < 0xDC00 || lo > 0xDFFF) {
                    fail(ps, "high surrogate without a low surrogate");
                    goto bad;
                }
                ps->p += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            o += put_utf8(buf + o, (unsigned)cp);
            break;
        }
        default:
            ps->p--;
            fail(ps, "invalid escape in string");
            goto bad;
        }
    }
    ps->p = q + 1;
    buf[o] = '\0';
    *len_out = o;
    return buf;
bad:
    free(buf);
    return NULL;
}

/* ---- values ------------------------------------------------------------ */

static bool parse_value(parser *ps, tlm_json *out, int depth);

/* Makes room for one more item (and key, and the key's offset in the
 * text: key_at, the parser's own) in an array or object. */
static bool grow(parser *ps, tlm_json *j, size_t *cap, size_t **key_at) {
    if (j->len < *cap) return true;
    size_t nc = *cap ? *cap * 2 : 4;
    tlm_json *ni = realloc(j->items, nc * sizeof *ni);
    if (!ni) goto oom;
    j->items = ni;
    if (j->type == TLM_JSON_OBJECT) {
        char **nk = realloc(j->keys, nc * sizeof *nk);
        if (!nk) goto oom;
        j->keys = nk;
        size_t *nl = realloc(j->key_lens, nc * sizeof *nl);
        if (!nl) goto oom;
        j->key_lens = nl;
        size_t *na = realloc(*key_at, nc * sizeof *na);
        if (!na) goto oom;
        *key_at = na;
    }
    *cap = nc;
    return true;
oom:
    fail(ps, "out of memory");
    return false;
}

/* A key given twice in one object is refused: which of the two counts is
 * every reader's own guess (Python's json takes the last, this reader's
 * lookup would take the first), so a tokenizer.json with two "model"s
 * meant different things to different tools. Checked when the object
 * closes: pairwise for a few keys, else by sorting them (n log n
 * comparisons at worst, where a hash table's buckets can be filled on
 * purpose: keys built to collide made a 2.7 MB object take 78 s). The
 * error is at the first key that repeats one before it. */
static bool same_key(const tlm_json *obj, size_t a, size_t b) {
    return obj->key_lens[a] == obj->key_lens[b] && !memcmp(obj->keys[a], obj->keys[b], obj->key_lens[a]);
}

/* By length, bytes, then place: equal keys side by side, in order. */
static int key_order(const void *pa, const void *pb, void *objp) {
    const tlm_json *obj = objp;
    size_t a = *(const size_t *)pa, b = *(const size_t *)pb;
    if (obj->key_lens[a] != obj->key_lens[b]) return obj->key_lens[a] < obj->key_lens[b] ? -1 : 1;
    int c = memcmp(obj->keys[a], obj->keys[b], obj->key_lens[a]);
    return c ? c : a < b ? -1 : a > b;
}

static bool no_duplicate_keys(parser *ps, const tlm_json *obj, const size_t *key_at) {
    size_t n = obj->len, repeat = SIZE_MAX;
    if (n < 2) return true;
    if (n <= 16) {
        for (size_t j = 1; j < n && repeat == SIZE_MAX; j++)
            for (size_t i = 0; i < j; i++)
                if (same_key(obj, i, j)) {
                    repeat = j;
                    break;
                }
    } else {
        size_t *order = malloc(n * sizeof *order);
        if (!order) {
            fail(ps, "out of memory");
            return false;
        }
        for (size_t i = 0; i < n; i++) order[i] = i;
        qsort_r(order, n, sizeof *order, key_order, (void *)obj);
        for (size_t i = 1; i < n; i++)
            if (order[i] < repeat && same_key(obj, order[i - 1], order[i])) repeat = order[i];
        free(order);
    }
    if (repeat == SIZE_MAX) return true;
    const char *key = obj->keys[repeat];
    size_t len = obj->key_lens[repeat];
    char what[96];
    int shown = len > 40 ? 40 : (int)len, printable = 1;
    for (int c = 0; c < shown; c++) printable &= key[c] >= 0x20 && key[c] < 0x7f;
    if (printable) snprintf(what, sizeof what, "duplicate key \"%.*s%s\"", shown, key, len > 40 ? "..." : "");
    else snprintf(what, sizeof what, "duplicate key");
    ps->p = ps->start + key_at[repeat];
    fail(ps, what);
    return false;
}

static bool parse_items(parser *ps, tlm_json *out, int depth, bool object, size_t **key_at);

/* key_at: each key's offset in the text, for a duplicate's message */
static bool parse_container(parser *ps, tlm_json *out, int depth, bool object) {
    size_t *key_at = NULL;
    bool ok = parse_items(ps, out, depth, object, &key_at);
    free(key_at);
    return ok;
}

static bool parse_items(parser *ps, tlm_json *out, int depth, bool object, size_t **key_at) {
    if (depth >= TLM_JSON_MAX_DEPTH) {
        fail(ps, "nesting too deep");
        return false;
    }
    char close = object ? '}' : ']';
    out->type = object ? TLM_JSON_OBJECT : TLM_JSON_ARRAY;
    ps->p++;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        return true;
    }
    size_t cap = 0;
    for (;;) {
        skip_ws(ps);
        if (!grow(ps, out, &cap, key_at)) return false;
        /* the slot counts as an item from here on, so a failure below
         * leaves a tree that tlm_json_free can release */
        size_t i = out->len++;
        memset(&out->items[i], 0, sizeof out->items[i]);
        if (object) {
            out->keys[i] = NULL;
            if (ps->p >= ps->end || *ps->p != '"') {
                fail(ps, "object key (a string) expected");
                return false;
            }
            (*key_at)[i] = (size_t)(ps->p - ps->start); /* a duplicate is reported where it starts */
            out->keys[i] = parse_string(ps, &out->key_lens[i]);
            if (!out->keys[i]) return false;
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != ':') {
                fail(ps, "':' expected after object key");
                return false;
            }
            ps->p++;
            skip_ws(ps);
        }
        if (!parse_value(ps, &out->items[i], depth + 1)) return false;
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == close) {
            ps->p++;
            return !object || no_duplicate_keys(ps, out, *key_at);
        }
        fail(ps, object ? "',' or '}' expected" : "',' or ']' expected");
        return false;
    }
}

static bool parse_value(parser *ps, tlm_json *out, int depth) {
    skip_ws(ps);
    if (ps->p >= ps->end) {
        fail(ps, "value expected");
        return false;
    }
    switch (*ps->p) {
    case '{': return parse_container(ps, out, depth, true);
    case '[': return parse_container(ps, out, depth, false);
    case '"':
        out->type = TLM_JSON_STRING;
        out->str = parse_string(ps, &out->len);
        return out->str != NULL;
    case 't':
        out->type = TLM_JSON_BOOL;
        out->boolean = true;
        return literal(ps, "true");
    case 'f': out->type = TLM_JSON_BOOL; return literal(ps, "false");
    case 'n': out->type = TLM_JSON_NULL; return literal(ps, "null");
    default:
        if (*ps->p == '-' || is_digit(*ps->p)) return parse_number(ps, out);
        fail(ps, "value expected");
        return false;
    }
}

static void free_inner(tlm_json *j) {
    if (j->type == TLM_JSON_STRING) free(j->str);
    if (j->type == TLM_JSON_ARRAY || j->type == TLM_JSON_OBJECT) {
        for (size_t i = 0; i < j->len; i++) {
            free_inner(&j->items[i]);
            if (j->keys) free(j->keys[i]);
        }
        free(j->items);
        free(j->keys);
        free(j->key_lens);
    }
}

void tlm_json_free(tlm_json *j) {
    if (!j) return;
    free_inner(j);
    free(j);
}

tlm_json *tlm_json_parse(const char *text, size_t len, tlm_err *err) {
    parser ps = {text, text, text + len, err, false};
    tlm_json *root = calloc(1, sizeof *root);
    if (!root) {
        tlm_fail(err, "JSON: out of memory");
        return NULL;
    }
    if (parse_value(&ps, root, 0)) {
        skip_ws(&ps);
        if (ps.p != ps.end) fail(&ps, "unexpected data after the value");
    }
    if (ps.failed) {
        tlm_json_free(root);
        return NULL;
    }
    return root;
}

const tlm_json *tlm_json_get(const tlm_json *j, const char *key) {
    if (!j || j->type != TLM_JSON_OBJECT) return NULL;
    size_t n = strlen(key);
    for (size_t i = 0; i < j->len; i++) {
        if (j->key_lens[i] == n && memcmp(j->keys[i], key, n) == 0) return &j->items[i];
    }
    return NULL;
}

/* ---- writing ----------------------------------------------------------- */

static bool sb_reserve(tlm_strbuf *sb, size_t extra) {
    if (sb->oom) return false;
    if (sb->len + extra + 1 <= sb->cap) return true;
    size_t nc = sb->cap ? sb->cap : 256;
    while (nc < sb->len + extra + 1) nc *= 2;
    char *nb = realloc(sb->buf, nc);
    if (!nb) {
        sb->oom = true;
        return false;
    }
    sb->buf = nb;
    sb->cap = nc;
    return true;
}

void tlm_sb_append(tlm_strbuf *sb, const char *s, size_t n) {
    if (!sb_reserve(sb, n)) return;
    memcpy(sb->buf + sb->len, s, n);
    sb->len += n;
    sb->buf[sb->len] = '\0';
}

void tlm_sb_puts(tlm_strbuf *sb, const char *s) { tlm_sb_append(sb, s, strlen(s)); }

void tlm_sb_printf(tlm_strbuf *sb, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !sb_reserve(sb, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(sb->buf + sb->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb->len += (size_t)n;
}

void tlm_sb_free(tlm_strbuf *sb) {
    free(sb->buf);
    *sb = (tlm_strbuf){0};
}

bool tlm_json_valid_utf8(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        size_t k = utf8_seq((const unsigned char *)s + i, n - i);
        if (k == 0) return false;
        i += k;
    }
    return true;
}

void tlm_json_write_string(tlm_strbuf *sb, const char *s, size_t n) {
    tlm_sb_append(sb, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x80) { /* a whole UTF-8 sequence, or U+FFFD for a byte that starts none */
            size_t k = utf8_seq((const unsigned char *)s + i, n - i);
            if (k == 0) tlm_sb_append(sb, "\\ufffd", 6);
            else tlm_sb_append(sb, s + i, k), i += k - 1;
            continue;
        }
        switch (c) {
        case '"': tlm_sb_append(sb, "\\\"", 2); break;
        case '\\': tlm_sb_append(sb, "\\\\", 2); break;
        case '\n': tlm_sb_append(sb, "\\n", 2); break;
        case '\r': tlm_sb_append(sb, "\\r", 2); break;
        case '\t': tlm_sb_append(sb, "\\t", 2); break;
        default:
            if (c < 0x20) tlm_sb_printf(sb, "\\u%04x", c);
            else tlm_sb_append(sb, (const char *)&s[i], 1);
        }
    }
    tlm_sb_append(sb, "\"", 1);
}

size_t tlm_utf8_bom_bytes(const void *s, size_t n) { return n >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0; }
