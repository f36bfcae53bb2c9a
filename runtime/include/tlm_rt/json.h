/* A small JSON reader and writer (RFC 8259), enough for safetensors headers,
 * checkpoint metadata and metrics lines; no dependencies.
 *
 * The reader builds a tree that one tlm_json_free releases. It is strict:
 * no trailing commas, comments, NaN, leading zeros or control characters in
 * strings; \u escapes (surrogate pairs included) become UTF-8 and a lone
 * surrogate is an error; nesting deeper than TLM_JSON_MAX_DEPTH is an error
 * (so hostile input cannot exhaust the stack). A key given twice in one
 * object is an error ("duplicate key \"model\"" at its second place, found
 * when the object closes: an inner object's first): readers disagree on
 * which counts. */
#ifndef TLM_RT_JSON_H
#define TLM_RT_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tlm_rt/error.h"

#define TLM_JSON_MAX_DEPTH 64

typedef enum tlm_json_type {
    TLM_JSON_NULL,
    TLM_JSON_BOOL,
    TLM_JSON_NUMBER,
    TLM_JSON_STRING,
    TLM_JSON_ARRAY,
    TLM_JSON_OBJECT,
} tlm_json_type;

typedef struct tlm_json tlm_json;
struct tlm_json {
    tlm_json_type type;
    bool boolean;
    double number;    /* NUMBER */
    bool is_int;      /* NUMBER written without fraction/exponent, fits int64 */
    int64_t integer;  /* valid when is_int */
    char *str;        /* STRING: NUL-terminated UTF-8 (may hold \0: see len) */
    size_t len;       /* STRING: bytes; ARRAY/OBJECT: number of items */
    tlm_json *items;  /* ARRAY/OBJECT: the values */
    char **keys;      /* OBJECT: keys[i] names items[i] */
    size_t *key_lens; /* OBJECT: byte length of each key */
};

/* Parses text[0..len) (whitespace around the value allowed). Returns NULL
 * and a message with the byte offset on error. */
tlm_json *tlm_json_parse(const char *text, size_t len, tlm_err *err);
void tlm_json_free(tlm_json *j);
/* Object member by key, or NULL (also when j is not an object). */
const tlm_json *tlm_json_get(const tlm_json *j, const char *key);

/* A growable string for writing JSON (and anything else). Out of memory
 * sets oom and drops further output; check it once at the end. */
typedef struct tlm_strbuf {
    char *buf; /* NUL-terminated when non-NULL */
    size_t len, cap;
    bool oom;
} tlm_strbuf;

void tlm_sb_append(tlm_strbuf *sb, const char *s, size_t n);
void tlm_sb_puts(tlm_strbuf *sb, const char *s);
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void tlm_sb_printf(tlm_strbuf *sb, const char *fmt, ...);
void tlm_sb_free(tlm_strbuf *sb);
/* Writes s[0..n) as a quoted JSON string, escaping ", \ and controls. */
void tlm_json_write_string(tlm_strbuf *sb, const char *s, size_t n);
/* Whether s[0..n) is UTF-8 as JSON strings must be (what the reader
 * accepts). tlm_json_write_string writes a byte that starts no UTF-8
 * sequence as \ufffd, so its output always reads back; a string that must
 * come back as it was (a path) is checked with this first. */
bool tlm_json_valid_utf8(const char *s, size_t n);

/* The bytes of a UTF-8 byte-order mark at the start of s[0..n) (3 or 0):
 * editors on Windows write one before JSON, which RFC 8259 lets a parser
 * ignore. */
size_t tlm_utf8_bom_bytes(const void *s, size_t n);

#endif
