/* libFuzzer target over the JSON reader (runtime/io/json.c), which reads
 * safetensors headers and the checkpoint's settings. Beyond crashes, leaks
 * and hangs it checks a round trip: a tree it accepts, written out again
 * (strings with tlm_json_write_string, numbers exactly), parses to the same
 * tree; and tlm_json_get finds the first item of each key. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tlm_rt/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void write_value(tlm_strbuf *sb, const tlm_json *j) {
    switch (j->type) {
    case TLM_JSON_NULL: tlm_sb_puts(sb, "null"); break;
    case TLM_JSON_BOOL: tlm_sb_puts(sb, j->boolean ? "true" : "false"); break;
    case TLM_JSON_NUMBER:
        if (j->is_int) tlm_sb_printf(sb, "%lld", (long long)j->integer);
        else tlm_sb_printf(sb, "%.17e", j->number); /* an exponent keeps it a non-integer */
        break;
    case TLM_JSON_STRING: tlm_json_write_string(sb, j->str, j->len); break;
    case TLM_JSON_ARRAY:
    case TLM_JSON_OBJECT:
        tlm_sb_puts(sb, j->type == TLM_JSON_ARRAY ? "[" : "{");
        for (size_t i = 0; i < j->len; i++) {
            if (i) tlm_sb_puts(sb, ",");
            if (j->type == TLM_JSON_OBJECT) {
                tlm_json_write_string(sb, j->keys[i], j->key_lens[i]);
                tlm_sb_puts(sb, ":");
            }
            write_value(sb, &j->items[i]);
        }
        tlm_sb_puts(sb, j->type == TLM_JSON_ARRAY ? "]" : "}");
        break;
    }
}

/* Numbers that JSON cannot write back (1e999 reads as infinity). */
static int all_finite(const tlm_json *j) {
    if (j->type == TLM_JSON_NUMBER) return isfinite(j->number);
    if (j->type != TLM_JSON_ARRAY && j->type != TLM_JSON_OBJECT) return 1;
    for (size_t i = 0; i < j->len; i++)
        if (!all_finite(&j->items[i])) return 0;
    return 1;
}

static int same(const tlm_json *a, const tlm_json *b) {
    if (a->type != b->type) return 0;
    switch (a->type) {
    case TLM_JSON_NULL: return 1;
    case TLM_JSON_BOOL: return a->boolean == b->boolean;
    /* -0 written as an integer reads back as +0: == and not the bits */
    case TLM_JSON_NUMBER:
        return a->number == b->number && a->is_int == b->is_int && (!a->is_int || a->integer == b->integer);
    case TLM_JSON_STRING: return a->len == b->len && memcmp(a->str, b->str, a->len) == 0 && a->str[a->len] == '\0';
    case TLM_JSON_ARRAY:
    case TLM_JSON_OBJECT:
        if (a->len != b->len) return 0;
        for (size_t i = 0; i < a->len; i++) {
            if (a->type == TLM_JSON_OBJECT &&
                (a->key_lens[i] != b->key_lens[i] || memcmp(a->keys[i], b->keys[i], a->key_lens[i]) != 0))
                return 0;
            if (!same(&a->items[i], &b->items[i])) return 0;
        }
        return 1;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tlm_err err;
    tlm_json *j = tlm_json_parse((const char *)data, size, &err);
    if (!j) {
        if (!memchr(err.msg, '\0', sizeof err.msg) || strncmp(err.msg, "JSON: ", 6) != 0) abort();
        return 0;
    }
    if (j->type == TLM_JSON_OBJECT) {
        for (size_t i = 0; i < j->len; i++) {
            /* a key with a NUL inside is looked up by its C-string prefix */
            if (strlen(j->keys[i]) != j->key_lens[i]) continue;
            const tlm_json *first = tlm_json_get(j, j->keys[i]);
            size_t k = 0;
            while (j->key_lens[k] != j->key_lens[i] || memcmp(j->keys[k], j->keys[i], j->key_lens[i]) != 0) k++;
            if (first != &j->items[k]) abort();
        }
    }
    if (all_finite(j)) {
        tlm_strbuf sb = {0};
        write_value(&sb, j);
        if (sb.oom) abort();
        tlm_json *again = tlm_json_parse(sb.buf, sb.len, &err);
        if (!again) {
            fprintf(stderr, "round trip: %s\n%s\n", err.msg, sb.buf);
            abort();
        }
        if (!same(j, again)) {
            fprintf(stderr, "round trip changed the tree:\n%s\n", sb.buf);
            abort();
        }
        tlm_json_free(again);
        tlm_sb_free(&sb);
    }
    tlm_json_free(j);
    return 0;
}
