#include "jsonl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "regular_file.h"

bool jsonl_open(jsonl_file *f, const char *path, tlm_err *err) {
    *f = (jsonl_file){.path = path};
    f->bytes = tlm_read_regular(path, JSONL_MAX_FILE, "a JSON-lines file", &f->size, err);
    /* a UTF-8 byte-order mark is skipped, as tokenizer.json's is */
    if (f->bytes) f->pos = tlm_utf8_bom_bytes(f->bytes, f->size);
    return f->bytes != NULL;
}

static bool blank(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r') return false;
    return true;
}

int jsonl_next(jsonl_file *f, tlm_json **value, tlm_err *err) {
    while (f->pos < f->size) {
        const uint8_t *start = f->bytes + f->pos;
        const uint8_t *nl = memchr(start, '\n', f->size - f->pos);
        size_t n = nl ? (size_t)(nl - start) : f->size - f->pos;
        f->pos += n + (nl != NULL);
        f->line++;
        if (blank(start, n)) continue;
        tlm_err e = {""};
        *value = tlm_json_parse((const char *)start, n, &e);
        if (!*value) {
            tlm_fail(err, "%s:%lld: %s", f->path, (long long)f->line, e.msg);
            return -1;
        }
        return 1;
    }
    return 0;
}

void jsonl_close(jsonl_file *f) {
    free(f->bytes);
    f->bytes = NULL;
}

const tlm_json *jsonl_field(const tlm_json *item, const char *key, tlm_json_type type, const char *path, int64_t line,
                            tlm_err *err) {
    static const char *const kinds[] = {"null", "a boolean", "a number", "a string", "an array", "an object"};
    if (item->type != TLM_JSON_OBJECT) {
        tlm_fail(err, "%s:%lld: an item must be a JSON object, not %s", path, (long long)line, kinds[item->type]);
        return NULL;
    }
    const tlm_json *v = tlm_json_get(item, key);
    if (!v) tlm_fail(err, "%s:%lld: the item has no \"%s\"", path, (long long)line, key);
    else if (v->type != type)
        tlm_fail(err, "%s:%lld: \"%s\" must be %s, not %s", path, (long long)line, key, kinds[type], kinds[v->type]);
    return v && v->type == type ? v : NULL;
}

void jsonl_number(char *buf, size_t n, double v) {
    if (isfinite(v)) snprintf(buf, n, "%.17g", v);
    else snprintf(buf, n, "null");
}
