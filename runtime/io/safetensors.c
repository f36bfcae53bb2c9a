/* safetensors reader (validating) and atomic writer. See safetensors.h. */
#include "tlm_rt/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic_file.h"
#include "le64.h"
#include "regular_file.h"
#include "tlm_rt/json.h"

/* the reference implementation refuses headers above 100 MB */
#define MAX_HEADER ((uint64_t)100 * 1000 * 1000)

static const struct {
    const char *name;
    size_t size;
} dtypes[] = {
    [TLM_F32] = {"F32", 4}, [TLM_F64] = {"F64", 8},   [TLM_F16] = {"F16", 2}, [TLM_BF16] = {"BF16", 2},
    [TLM_I64] = {"I64", 8}, [TLM_I32] = {"I32", 4},   [TLM_I16] = {"I16", 2}, [TLM_I8] = {"I8", 1},
    [TLM_U8] = {"U8", 1},   [TLM_BOOL] = {"BOOL", 1},
};
#define NDTYPES ((int)(sizeof dtypes / sizeof dtypes[0]))

const char *tlm_dtype_name(tlm_dtype t) { return (int)t >= 0 && (int)t < NDTYPES ? dtypes[t].name : "?"; }

size_t tlm_dtype_size(tlm_dtype t) { return (int)t >= 0 && (int)t < NDTYPES ? dtypes[t].size : 0; }

/* numel * elem_size, or false on a negative dim or overflow past 2^62 */
static bool byte_size(const int64_t *shape, int ndim, size_t elem, uint64_t *out) {
    uint64_t n = elem;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return false;
        uint64_t d = (uint64_t)shape[i];
        if (d != 0 && n > ((uint64_t)1 << 62) / d) return false;
        n *= d;
    }
    *out = n;
    return true;
}

/* ======================================================================
 * Writing
 * ====================================================================== */

static int cmp_name_ptr(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Builds the padded JSON header; returns -1 with a message on bad input. */
static int build_header(tlm_strbuf *sb, const tlm_st_tensor *ts, int n, const tlm_st_meta *meta, int nmeta,
                        tlm_err *err) {
    tlm_sb_puts(sb, "{");
    bool first = true;
    if (nmeta > 0) {
        tlm_sb_puts(sb, "\"__metadata__\":{");
        for (int i = 0; i < nmeta; i++) {
            if (i) tlm_sb_puts(sb, ",");
            tlm_json_write_string(sb, meta[i].key, strlen(meta[i].key));
            tlm_sb_puts(sb, ":");
            tlm_json_write_string(sb, meta[i].value, strlen(meta[i].value));
        }
        tlm_sb_puts(sb, "}");
        first = false;
    }
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        const tlm_st_tensor *t = &ts[i];
        uint64_t nb;
        if ((int)t->dtype < 0 || (int)t->dtype >= NDTYPES) {
            tlm_fail(err, "tensor '%s': unknown dtype %d", t->name, (int)t->dtype);
            return -1;
        }
        if (t->ndim < 0 || t->ndim > TLM_ST_MAX_DIMS || !byte_size(t->shape, t->ndim, tlm_dtype_size(t->dtype), &nb)) {
            tlm_fail(err, "tensor '%s': invalid shape", t->name);
            return -1;
        }
        if (!first) tlm_sb_puts(sb, ",");
        first = false;
        tlm_json_write_string(sb, t->name, strlen(t->name));
        tlm_sb_printf(sb, ":{\"dtype\":\"%s\",\"shape\":[", tlm_dtype_name(t->dtype));
        for (int d = 0; d < t->ndim; d++) { tlm_sb_printf(sb, "%s%lld", d ? "," : "", (long long)t->shape[d]); }
        tlm_sb_printf(sb, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off, (unsigned long long)(off + nb));
        off += nb;
    }
    tlm_sb_puts(sb, "}");
    /* pad with spaces so the data section starts 8-byte aligned, as the
     * reference writer does */
    while (sb->len % 8) tlm_sb_puts(sb, " ");
    if (sb->oom) {
        tlm_fail(err, "out of memory building the safetensors header");
        return -1;
    }
    return 0;
}

static int check_names(const tlm_st_tensor *ts, int n, tlm_err *err) {
    if (n < 0) {
        tlm_fail(err, "negative tensor count");
        return -1;
    }
    for (int i = 0; i < n; i++) {
        if (!ts[i].name || !ts[i].name[0]) {
            tlm_fail(err, "tensor %d has an empty name", i);
            return -1;
        }
        if (strcmp(ts[i].name, "__metadata__") == 0) {
            tlm_fail(err, "'__metadata__' cannot name a tensor");
            return -1;
        }
        if (!ts[i].data && ts[i].ndim >= 0) {
            uint64_t nb = 0;
            if (byte_size(ts[i].shape, ts[i].ndim, 1, &nb) && nb > 0) {
                tlm_fail(err, "tensor '%s' has no data", ts[i].name);
                return -1;
            }
        }
    }
    const char **names = malloc((size_t)(n > 0 ? n : 1) * sizeof *names);
    if (!names) {
        tlm_fail(err, "out of memory");
        return -1;
    }
    for (int i = 0; i < n; i++) names[i] = ts[i].name;
    qsort(names, (size_t)n, sizeof *names, cmp_name_ptr);
    for (int i = 1; i < n; i++) {
        if (strcmp(names[i - 1], names[i]) == 0) {
            tlm_fail(err, "duplicate tensor name '%s'", names[i]);
            free(names);
            return -1;
        }
    }
    free(names);
    return 0;
}

int tlm_st_write_fd(int fd, const char *name, const tlm_st_tensor *ts, int n, const tlm_st_meta *meta, int nmeta,
                    tlm_err *err) {
    if (check_names(ts, n, err) != 0) return -1;
    if (nmeta < 0) nmeta = 0;
    tlm_strbuf hdr = {0};
    if (build_header(&hdr, ts, n, meta, nmeta, err) != 0) {
        tlm_sb_free(&hdr);
        return -1;
    }
    uint8_t len8[8];
    tlm_put_le64(len8, hdr.len);
    bool ok = tlm_write_all(fd, len8, 8) && tlm_write_all(fd, hdr.buf, hdr.len);
    for (int i = 0; ok && i < n; i++) {
        uint64_t nb = 0;
        byte_size(ts[i].shape, ts[i].ndim, tlm_dtype_size(ts[i].dtype), &nb);
        if (nb) ok = tlm_write_all(fd, ts[i].data, (size_t)nb);
    }
    tlm_sb_free(&hdr);
    if (!ok || fsync(fd) != 0) {
        tlm_fail(err, "%s: write failed: %s", name, strerror(errno));
        return -1;
    }
    return 0;
}

int tlm_st_write(const char *path, const tlm_st_tensor *ts, int n, const tlm_st_meta *meta, int nmeta, tlm_err *err) {
    tlm_atomic_file f;
    if (!tlm_atomic_open(&f, path, err)) return -1;
    if (tlm_st_write_fd(f.fd, f.tmp, ts, n, meta, nmeta, err) != 0) {
        tlm_atomic_abort(&f);
        return -1;
    }
    return tlm_atomic_commit(&f, err) ? 0 : -1;
}

/* ======================================================================
 * Reading
 * ====================================================================== */

struct tlm_st_file {
    uint8_t *buf; /* the whole file */
    size_t len;
    tlm_json *header;
    tlm_st_tensor *tensors; /* sorted by offset */
    int n;
    tlm_st_meta *meta;
    int nmeta;
};

void tlm_st_close(tlm_st_file *f) {
    if (!f) return;
    free(f->buf);
    tlm_json_free(f->header);
    free(f->tensors);
    free(f->meta);
    free(f);
}

static bool get_dtype(const tlm_json *j, tlm_dtype *out) {
    if (!j || j->type != TLM_JSON_STRING) return false;
    for (int i = 0; i < NDTYPES; i++) {
        if (strcmp(j->str, dtypes[i].name) == 0 && j->len == strlen(dtypes[i].name)) {
            *out = (tlm_dtype)i;
            return true;
        }
    }
    return false;
}

static int cmp_tensor_offset(const void *a, const void *b) {
    const tlm_st_tensor *x = a, *y = b;
    const uint8_t *px = x->data, *py = y->data;
    if (px != py) return px < py ? -1 : 1;
    /* equal starts: the empty tensor first, so an overlap shows up next */
    if (x->nbytes != y->nbytes) return x->nbytes < y->nbytes ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int cmp_tensor_name(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Validates one tensor entry into t. data_start: first byte of the data
 * section; dlen: its length. */
static int parse_entry(const char *name, const tlm_json *e, const uint8_t *data_start, uint64_t dlen, tlm_st_tensor *t,
                       tlm_err *err) {
    if (e->type != TLM_JSON_OBJECT) {
        tlm_fail(err, "safetensors: entry '%s' is not an object", name);
        return -1;
    }
    const tlm_json *dt = tlm_json_get(e, "dtype");
    const tlm_json *sh = tlm_json_get(e, "shape");
    const tlm_json *of = tlm_json_get(e, "data_offsets");
    if (!get_dtype(dt, &t->dtype)) {
        tlm_fail(err, "safetensors: tensor '%s': missing or unknown dtype", name);
        return -1;
    }
    if (!sh || sh->type != TLM_JSON_ARRAY || sh->len > TLM_ST_MAX_DIMS) {
        tlm_fail(err,
                 "safetensors: tensor '%s': shape must be an array of at "
                 "most %d dimensions",
                 name, TLM_ST_MAX_DIMS);
        return -1;
    }
    t->ndim = (int)sh->len;
    for (int d = 0; d < t->ndim; d++) {
        const tlm_json *x = &sh->items[d];
        if (x->type != TLM_JSON_NUMBER || !x->is_int || x->integer < 0) {
            tlm_fail(err,
                     "safetensors: tensor '%s': shape entries must be "
                     "non-negative integers",
                     name);
            return -1;
        }
        t->shape[d] = x->integer;
    }
    if (!of || of->type != TLM_JSON_ARRAY || of->len != 2) {
        tlm_fail(err,
                 "safetensors: tensor '%s': data_offsets must be [begin, "
                 "end]",
                 name);
        return -1;
    }
    for (int k = 0; k < 2; k++) {
        if (of->items[k].type != TLM_JSON_NUMBER || !of->items[k].is_int || of->items[k].integer < 0) {
            tlm_fail(err,
                     "safetensors: tensor '%s': data_offsets must be "
                     "non-negative integers",
                     name);
            return -1;
        }
    }
    uint64_t begin = (uint64_t)of->items[0].integer;
    uint64_t end = (uint64_t)of->items[1].integer;
    if (begin > end) {
        tlm_fail(err, "safetensors: tensor '%s': data_offsets [%llu, %llu] end before they begin", name,
                 (unsigned long long)begin, (unsigned long long)end);
        return -1;
    }
    if (end > dlen) { /* the header is whole, the data not: most likely a copy cut short */
        tlm_fail(err,
                 "safetensors: truncated: tensor '%s' ends at data offset %llu, but the file holds %llu bytes "
                 "of data (%llu short)",
                 name, (unsigned long long)end, (unsigned long long)dlen, (unsigned long long)(end - dlen));
        return -1;
    }
    uint64_t nb;
    if (!byte_size(t->shape, t->ndim, tlm_dtype_size(t->dtype), &nb) || nb != end - begin) {
        tlm_fail(err,
                 "safetensors: tensor '%s': %llu bytes at data_offsets, "
                 "but dtype %s and its shape need a different size",
                 name, (unsigned long long)(end - begin), tlm_dtype_name(t->dtype));
        return -1;
    }
    t->name = name;
    t->data = data_start + begin;
    t->nbytes = (size_t)nb;
    return 0;
}

/* The file's first 8 bytes (the header's length, `head`) against its
 * length; the header's length, or -1 with the reason in err. */
static int64_t header_length(const uint8_t *head, uint64_t len, tlm_err *err) {
    if (len < 8) {
        tlm_fail(err, "safetensors: file too short (%llu bytes) for the 8-byte header length", (unsigned long long)len);
        return -1;
    }
    if (!memcmp(head, "GGUF", 4)) {
        tlm_fail(err, "a GGUF file (for llama.cpp: what `tlm-run export` writes), not a safetensors checkpoint");
        return -1;
    }
    uint64_t hlen = tlm_get_le64(head);
    if (hlen > MAX_HEADER) {
        tlm_fail(err, "not a safetensors file: its first 8 bytes give a header of %llu bytes, over the 100 MB limit",
                 (unsigned long long)hlen);
        return -1;
    }
    if (hlen > len - 8) {
        tlm_fail(err, "safetensors: truncated: the header is %llu bytes, the file holds %llu after its length",
                 (unsigned long long)hlen, (unsigned long long)(len - 8));
        return -1;
    }
    return (int64_t)hlen;
}

/* The header's JSON, which must be an object; NULL with the reason. */
static tlm_json *header_json(const uint8_t *text, uint64_t hlen, tlm_err *err) {
    tlm_err jerr;
    tlm_json *j = tlm_json_parse((const char *)text, (size_t)hlen, &jerr);
    if (!j) tlm_fail(err, "safetensors: bad header: %s", jerr.msg);
    else if (j->type != TLM_JSON_OBJECT) {
        tlm_fail(err, "safetensors: header is not a JSON object");
        tlm_json_free(j);
        j = NULL;
    }
    return j;
}

/* Takes ownership of buf and of header (freed on failure too): buf's
 * header parsed already (tlm_st_open), or NULL to parse it here. */
static tlm_st_file *parse_owned(uint8_t *buf, size_t len, tlm_json *header, tlm_err *err) {
    tlm_st_file *f = calloc(1, sizeof *f);
    if (!f) {
        free(buf);
        tlm_json_free(header);
        tlm_fail(err, "out of memory");
        return NULL;
    }
    f->buf = buf;
    f->len = len;
    f->header = header;
    const int64_t header_len = header_length(buf, len, err);
    if (header_len < 0) goto bad;
    const uint64_t hlen = (uint64_t)header_len;
    if (!f->header && !(f->header = header_json(buf + 8, hlen, err))) goto bad;
    const uint8_t *data = buf + 8 + hlen;
    uint64_t dlen = len - 8 - hlen;
    size_t nk = f->header->len;
    f->tensors = calloc(nk ? nk : 1, sizeof *f->tensors);
    if (!f->tensors) {
        tlm_fail(err, "out of memory");
        goto bad;
    }
    bool seen_meta = false;
    for (size_t i = 0; i < nk; i++) {
        const char *key = f->header->keys[i];
        const tlm_json *val = &f->header->items[i];
        if (strlen(key) != f->header->key_lens[i]) {
            tlm_fail(err, "safetensors: a name contains a NUL character");
            goto bad;
        }
        if (strcmp(key, "__metadata__") == 0) {
            if (seen_meta || val->type != TLM_JSON_OBJECT) {
                tlm_fail(err, "safetensors: __metadata__ must appear once, as "
                              "an object of strings");
                goto bad;
            }
            seen_meta = true;
            f->meta = calloc(val->len ? val->len : 1, sizeof *f->meta);
            if (!f->meta) {
                tlm_fail(err, "out of memory");
                goto bad;
            }
            for (size_t m = 0; m < val->len; m++) {
                const tlm_json *mv = &val->items[m];
                if (mv->type != TLM_JSON_STRING || strlen(mv->str) != mv->len ||
                    strlen(val->keys[m]) != val->key_lens[m]) {
                    tlm_fail(err, "safetensors: __metadata__ values must be "
                                  "strings (without NUL)");
                    goto bad;
                }
                f->meta[f->nmeta++] = (tlm_st_meta){val->keys[m], mv->str};
            }
            continue;
        }
        if (key[0] == '\0') {
            tlm_fail(err, "safetensors: empty tensor name");
            goto bad;
        }
        if (parse_entry(key, val, data, dlen, &f->tensors[f->n], err) != 0) goto bad;
        f->n++;
    }
    /* distinct names */
    const char **names = malloc((size_t)(f->n ? f->n : 1) * sizeof *names);
    if (!names) {
        tlm_fail(err, "out of memory");
        goto bad;
    }
    for (int i = 0; i < f->n; i++) names[i] = f->tensors[i].name;
    qsort(names, (size_t)f->n, sizeof *names, cmp_tensor_name);
    for (int i = 1; i < f->n; i++) {
        if (strcmp(names[i - 1], names[i]) == 0) {
            tlm_fail(err, "safetensors: duplicate tensor '%s'", names[i]);
            free(names);
            goto bad;
        }
    }
    free(names);
    /* the tensors must tile the data section: each starts where the
     * previous one ended, the last ends at the end of the file */
    qsort(f->tensors, (size_t)f->n, sizeof *f->tensors, cmp_tensor_offset);
    uint64_t at = 0;
    for (int i = 0; i < f->n; i++) {
        const tlm_st_tensor *t = &f->tensors[i];
        uint64_t begin = (uint64_t)((const uint8_t *)t->data - data);
        if (begin != at) {
            tlm_fail(err,
                     "safetensors: tensor '%s' starts at data offset %llu, "
                     "expected %llu (%s)",
                     t->name, (unsigned long long)begin, (unsigned long long)at,
                     begin < at ? "overlaps the previous tensor" : "gap before it");
            goto bad;
        }
        at = begin + t->nbytes;
    }
    if (at != dlen) {
        tlm_fail(err,
                 "safetensors: the tensors cover %llu bytes but the data "
                 "section has %llu (truncated or trailing bytes)",
                 (unsigned long long)at, (unsigned long long)dlen);
        goto bad;
    }
    return f;
bad:
    tlm_st_close(f);
    return NULL;
}

tlm_st_file *tlm_st_parse(const void *bytes, size_t len, tlm_err *err) {
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf) {
        tlm_fail(err, "out of memory");
        return NULL;
    }
    if (len) memcpy(buf, bytes, len);
    return parse_owned(buf, len, NULL, err);
}

/* The header of the file open at fd, from its first bytes read alone: a
 * damaged header is said as such before the file is read whole (a sparse
 * or huge file with a bad header would otherwise read as "out of memory",
 * or take minutes to read). NULL with the reason. */
static tlm_json *header_first(int fd, tlm_err *err) {
    struct stat st;
    uint8_t head[8] = {0};
    if (fstat(fd, &st) != 0 || (st.st_size >= 8 && pread(fd, head, 8, 0) != 8))
        return tlm_fail(err, "cannot read it: %s", strerror(errno)), NULL;
    const int64_t hlen = header_length(head, (uint64_t)st.st_size, err);
    if (hlen < 0) return NULL;
    uint8_t *text = malloc((size_t)hlen + 1);
    tlm_json *header = NULL;
    if (!text) tlm_fail(err, "out of memory");
    else if (errno = 0, pread(fd, text, (size_t)hlen, 8) != (ssize_t)hlen)
        tlm_fail(err, "cannot read the header: %s", errno ? strerror(errno) : "the file shrank");
    else header = header_json(text, (uint64_t)hlen, err);
    free(text);
    return header;
}

tlm_st_file *tlm_st_open(const char *path, tlm_err *err) {
    int fd = tlm_open_regular(path, err);
    if (fd < 0) return NULL;
    tlm_err perr = {""};
    size_t len = 0;
    uint8_t *buf = NULL;
    tlm_json *header = header_first(fd, &perr);
    if (!header) tlm_fail(err, "%s: %s", path, perr.msg);
    else buf = tlm_read_regular_fd(fd, path, SIZE_MAX, "read", &len, err);
    close(fd);
    if (!buf) {
        tlm_json_free(header);
        return NULL;
    }
    tlm_st_file *f = parse_owned(buf, len, header, &perr);
    if (!f) tlm_fail(err, "%s: %s", path, perr.msg);
    return f;
}

int tlm_st_count(const tlm_st_file *f) { return f->n; }

const tlm_st_tensor *tlm_st_at(const tlm_st_file *f, int i) { return i >= 0 && i < f->n ? &f->tensors[i] : NULL; }

const tlm_st_tensor *tlm_st_find(const tlm_st_file *f, const char *name) {
    for (int i = 0; i < f->n; i++) {
        if (strcmp(f->tensors[i].name, name) == 0) return &f->tensors[i];
    }
    return NULL;
}

const char *tlm_st_meta_get(const tlm_st_file *f, const char *key) {
    for (int i = 0; i < f->nmeta; i++) {
        if (strcmp(f->meta[i].key, key) == 0) return f->meta[i].value;
    }
    return NULL;
}

int tlm_st_meta_count(const tlm_st_file *f) { return f->nmeta; }

const tlm_st_meta *tlm_st_meta_at(const tlm_st_file *f, int i) { return i >= 0 && i < f->nmeta ? &f->meta[i] : NULL; }

int tlm_st_read(const tlm_st_file *f, const char *name, tlm_dtype dtype, int ndim, const int64_t *shape, void *dst,
                tlm_err *err) {
    const tlm_st_tensor *t = tlm_st_find(f, name);
    if (!t) {
        tlm_fail(err, "tensor '%s' not found", name);
        return -1;
    }
    if (t->dtype != dtype) {
        tlm_fail(err, "tensor '%s': dtype %s, expected %s", name, tlm_dtype_name(t->dtype), tlm_dtype_name(dtype));
        return -1;
    }
    bool same = t->ndim == ndim;
    for (int d = 0; same && d < ndim; d++) same = t->shape[d] == shape[d];
    if (!same) {
        char got[160] = "", want[160] = "";
        for (int d = 0; d < t->ndim; d++) {
            size_t l = strlen(got);
            snprintf(got + l, sizeof got - l, "%s%lld", d ? "," : "", (long long)t->shape[d]);
        }
        for (int d = 0; d < ndim; d++) {
            size_t l = strlen(want);
            snprintf(want + l, sizeof want - l, "%s%lld", d ? "," : "", (long long)shape[d]);
        }
        tlm_fail(err, "tensor '%s': shape [%s], expected [%s]", name, got, want);
        return -1;
    }
    if (t->nbytes) memcpy(dst, t->data, t->nbytes);
    return 0;
}
