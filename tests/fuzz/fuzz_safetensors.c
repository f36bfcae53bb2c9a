/* libFuzzer target over the safetensors reader (runtime/io/safetensors.c),
 * which reads checkpoints and reference dumps: tlm_st_parse on the bytes.
 * Beyond crashes, leaks and hangs: every tensor it accepts is readable in
 * full (the sanitizers see a read past the file), findable by name, and
 * the accepted file written again with tlm_st_write reads back (through
 * tlm_st_open, the file path) with the same tensors and metadata. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tlm_rt/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char path[4096];

static void cleanup(void) { unlink(path); }

static int same_tensor(const tlm_st_tensor *a, const tlm_st_tensor *b) {
    if (strcmp(a->name, b->name) != 0 || a->dtype != b->dtype || a->ndim != b->ndim || a->nbytes != b->nbytes) return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return 0;
    return a->nbytes == 0 || memcmp(a->data, b->data, a->nbytes) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!path[0]) {
        const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
        snprintf(path, sizeof path, "%s/fuzz_safetensors.%ld.safetensors", dir, (long)getpid());
        atexit(cleanup);
    }
    tlm_err err;
    tlm_st_file *f = tlm_st_parse(data, size, &err);
    if (!f) return 0;
    int n = tlm_st_count(f);
    tlm_st_tensor *copy = calloc((size_t)(n ? n : 1), sizeof *copy);
    if (!copy) abort();
    for (int i = 0; i < n; i++) {
        const tlm_st_tensor *t = tlm_st_at(f, i);
        size_t want = tlm_dtype_size(t->dtype);
        for (int d = 0; d < t->ndim; d++) want *= (size_t)t->shape[d];
        if (want != t->nbytes || tlm_st_find(f, t->name) != t) abort();
        void *dst = malloc(t->nbytes ? t->nbytes : 1);
        if (!dst || tlm_st_read(f, t->name, t->dtype, t->ndim, t->shape, dst, &err) != 0) abort();
        if (t->nbytes && memcmp(dst, t->data, t->nbytes) != 0) abort();
        free(dst);
        copy[i] = *t;
    }
    int nm = tlm_st_meta_count(f);
    tlm_st_meta *meta = calloc((size_t)(nm ? nm : 1), sizeof *meta);
    if (!meta) abort();
    for (int i = 0; i < nm; i++) {
        meta[i] = *tlm_st_meta_at(f, i);
        if (!tlm_st_meta_get(f, meta[i].key)) abort();
    }
    if (tlm_st_write(path, copy, n, meta, nm, &err) != 0) {
        fprintf(stderr, "cannot write back an accepted file: %s\n", err.msg);
        abort();
    }
    tlm_st_file *g = tlm_st_open(path, &err);
    if (!g) {
        fprintf(stderr, "cannot read back an accepted file: %s\n", err.msg);
        abort();
    }
    if (tlm_st_count(g) != n || tlm_st_meta_count(g) != nm) abort();
    for (int i = 0; i < n; i++) {
        const tlm_st_tensor *t = tlm_st_find(g, copy[i].name);
        if (!t || !same_tensor(t, &copy[i])) abort();
    }
    for (int i = 0; i < nm; i++) {
        const char *v = tlm_st_meta_get(g, meta[i].key);
        if (!v || strcmp(v, tlm_st_meta_get(f, meta[i].key)) != 0) abort();
    }
    tlm_st_close(g);
    free(meta);
    free(copy);
    tlm_st_close(f);
    return 0;
}
