#include "gguf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "atomic_file.h"

/* ---- the key/value buffer ---- */

static void put(tlm_gguf *g, const void *p, size_t n) {
    if (g->oom) return;
    if (g->kv_len + n > g->kv_cap) {
        size_t cap = g->kv_cap ? g->kv_cap : 4096;
        while (cap < g->kv_len + n) cap *= 2;
        uint8_t *k = realloc(g->kv, cap);
        if (!k) {
            g->oom = true;
            return;
        }
        g->kv = k, g->kv_cap = cap;
    }
    memcpy(g->kv + g->kv_len, p, n);
    g->kv_len += n;
}

static void put_u32(tlm_gguf *g, uint32_t v) {
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(g, b, 4);
}

static void put_u64(tlm_gguf *g, uint64_t v) {
    put_u32(g, (uint32_t)v);
    put_u32(g, (uint32_t)(v >> 32));
}

static void put_str(tlm_gguf *g, const char *s, size_t n) {
    put_u64(g, n);
    put(g, s, n);
}

static void key(tlm_gguf *g, const char *k, uint32_t type) {
    put_str(g, k, strlen(k));
    put_u32(g, type);
    g->nkv++;
}

void tlm_gguf_set_u32(tlm_gguf *g, const char *k, uint32_t v) {
    key(g, k, TLM_GGUF_UINT32);
    put_u32(g, v);
}

void tlm_gguf_set_f32(tlm_gguf *g, const char *k, float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    key(g, k, TLM_GGUF_FLOAT32);
    put_u32(g, u);
}

void tlm_gguf_set_bool(tlm_gguf *g, const char *k, bool v) {
    key(g, k, TLM_GGUF_BOOL);
    uint8_t b = v;
    put(g, &b, 1);
}

void tlm_gguf_set_str(tlm_gguf *g, const char *k, const char *v) {
    key(g, k, TLM_GGUF_STRING);
    put_str(g, v, strlen(v));
}

void tlm_gguf_set_arr_i32(tlm_gguf *g, const char *k, const int32_t *v, size_t n) {
    key(g, k, TLM_GGUF_ARRAY);
    put_u32(g, TLM_GGUF_INT32);
    put_u64(g, n);
    for (size_t i = 0; i < n; i++) put_u32(g, (uint32_t)v[i]);
}

void tlm_gguf_set_arr_str(tlm_gguf *g, const char *k, const char *const *v, const size_t *lens, size_t n) {
    key(g, k, TLM_GGUF_ARRAY);
    put_u32(g, TLM_GGUF_STRING);
    put_u64(g, n);
    for (size_t i = 0; i < n; i++) put_str(g, v[i], lens[i]);
}

void tlm_gguf_add_tensor(tlm_gguf *g, const char *name, uint32_t ndim, const int64_t *ne, uint32_t type, uint8_t *data,
                         size_t nbytes) {
    char *copy = strdup(name);
    if (g->ntensors == g->tensors_cap) {
        size_t cap = g->tensors_cap ? 2 * g->tensors_cap : 64;
        tlm_gguf_tensor *t = realloc(g->tensors, cap * sizeof *t);
        if (t) g->tensors = t, g->tensors_cap = cap;
    }
    if (!copy || !data || g->ntensors == g->tensors_cap || ndim < 1 || ndim > 4) {
        g->oom = true;
        free(copy);
        free(data);
        return;
    }
    tlm_gguf_tensor *t = &g->tensors[g->ntensors++];
    *t = (tlm_gguf_tensor){.name = copy, .ndim = ndim, .type = type, .data = data, .nbytes = nbytes};
    memcpy(t->ne, ne, ndim * sizeof *ne);
}

/* ---- the file ---- */

static uint64_t pad(uint64_t n) { return (n + TLM_GGUF_ALIGN - 1) / TLM_GGUF_ALIGN * TLM_GGUF_ALIGN; }

/* The header and the tensor infos, into a fresh buffer (the kv builder's
 * helpers reused on a second tlm_gguf). */
static bool head(const tlm_gguf *g, tlm_gguf *h) {
    *h = (tlm_gguf){0};
    put_u32(h, TLM_GGUF_MAGIC);
    put_u32(h, TLM_GGUF_VERSION);
    put_u64(h, g->ntensors);
    put_u64(h, g->nkv);
    put(h, g->kv, g->kv_len);
    uint64_t off = 0;
    for (size_t i = 0; i < g->ntensors; i++) {
        const tlm_gguf_tensor *t = &g->tensors[i];
        put_str(h, t->name, strlen(t->name));
        put_u32(h, t->ndim);
        for (uint32_t d = 0; d < t->ndim; d++) put_u64(h, (uint64_t)t->ne[d]);
        put_u32(h, t->type);
        put_u64(h, off);
        off += pad(t->nbytes);
    }
    return !h->oom;
}

uint64_t tlm_gguf_file_size(const tlm_gguf *g) {
    tlm_gguf h;
    uint64_t n = head(g, &h) ? pad(h.kv_len) : 0;
    free(h.kv);
    for (size_t i = 0; i < g->ntensors; i++) n += pad(g->tensors[i].nbytes);
    return n;
}

static bool write_padded(int fd, const void *p, size_t n) {
    static const uint8_t zeros[TLM_GGUF_ALIGN];
    return tlm_write_all(fd, p, n) && tlm_write_all(fd, zeros, (size_t)(pad(n) - n));
}

bool tlm_gguf_write(const tlm_gguf *g, const char *path, tlm_err *err) {
    tlm_gguf h = {0};
    if (g->oom || !head(g, &h)) {
        free(h.kv);
        return tlm_fail(err, "%s: out of memory", path);
    }
    tlm_atomic_file f;
    if (!tlm_atomic_open(&f, path, err)) {
        free(h.kv);
        return false;
    }
    bool ok = write_padded(f.fd, h.kv, h.kv_len);
    for (size_t i = 0; ok && i < g->ntensors; i++) ok = write_padded(f.fd, g->tensors[i].data, g->tensors[i].nbytes);
    int e = errno;
    free(h.kv);
    if (!ok) {
        tlm_atomic_abort(&f);
        return tlm_fail(err, "%s: cannot write: %s", path, strerror(e));
    }
    return tlm_atomic_commit(&f, err);
}

void tlm_gguf_free(tlm_gguf *g) {
    for (size_t i = 0; i < g->ntensors; i++) free(g->tensors[i].name), free(g->tensors[i].data);
    free(g->tensors);
    free(g->kv);
    *g = (tlm_gguf){0};
}
