/* A GGUF v3 writer (the file format of llama.cpp and ggml): the header,
 * metadata key/values (scalars, strings, arrays), the tensor infos and the
 * tensor data, each tensor at a multiple of TLM_GGUF_ALIGN bytes from the
 * data's start. Layout of the file, all little-endian:
 *
 *   u32 magic "GGUF", u32 version 3, u64 tensor count, u64 key/value count
 *   per key/value: string key, u32 value type, value (an array: u32 item
 *                  type, u64 count, items); a string is u64 length + bytes
 *   per tensor:    string name, u32 n_dims, u64 ne[n_dims] (ne[0] varies
 *                  fastest: a [rows, cols] matrix is ne = {cols, rows}),
 *                  u32 ggml type, u64 offset into the data
 *   zero padding to TLM_GGUF_ALIGN, then the data, each tensor padded
 *
 * The builder keeps everything in memory (a model's bytes) and writes the
 * file atomically: a temporary in the target's folder, fsync, rename. */
#ifndef TLM_EXPORT_GGUF_H
#define TLM_EXPORT_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "errmsg.h"

#define TLM_GGUF_MAGIC 0x46554747u /* "GGUF" */
#define TLM_GGUF_VERSION 3u
#define TLM_GGUF_ALIGN 32 /* general.alignment's default */

/* Metadata value types (gguf_type). */
enum tlm_gguf_value_type {
    TLM_GGUF_UINT8 = 0,
    TLM_GGUF_INT8 = 1,
    TLM_GGUF_UINT16 = 2,
    TLM_GGUF_INT16 = 3,
    TLM_GGUF_UINT32 = 4,
    TLM_GGUF_INT32 = 5,
    TLM_GGUF_FLOAT32 = 6,
    TLM_GGUF_BOOL = 7,
    TLM_GGUF_STRING = 8,
    TLM_GGUF_ARRAY = 9,
    TLM_GGUF_UINT64 = 10,
    TLM_GGUF_INT64 = 11,
    TLM_GGUF_FLOAT64 = 12,
};

typedef struct tlm_gguf_tensor {
    char *name;
    uint32_t ndim;
    int64_t ne[4];
    uint32_t type; /* tlm_ggml_type (quant.h) */
    uint8_t *data; /* owned */
    size_t nbytes;
} tlm_gguf_tensor;

typedef struct tlm_gguf {
    uint8_t *kv; /* the key/values, serialised as they are added */
    size_t kv_len, kv_cap;
    uint64_t nkv;
    tlm_gguf_tensor *tensors;
    size_t ntensors, tensors_cap;
    bool oom; /* an allocation failed: tlm_gguf_write refuses */
} tlm_gguf;

/* Key/values, in the order they are added. */
void tlm_gguf_set_u32(tlm_gguf *g, const char *key, uint32_t v);
void tlm_gguf_set_f32(tlm_gguf *g, const char *key, float v);
void tlm_gguf_set_bool(tlm_gguf *g, const char *key, bool v);
void tlm_gguf_set_str(tlm_gguf *g, const char *key, const char *v);
void tlm_gguf_set_arr_i32(tlm_gguf *g, const char *key, const int32_t *v, size_t n);
/* n strings, string i of lens[i] bytes. */
void tlm_gguf_set_arr_str(tlm_gguf *g, const char *key, const char *const *v, const size_t *lens, size_t n);

/* Adds a tensor, taking ownership of data (malloc'd, nbytes long). */
void tlm_gguf_add_tensor(tlm_gguf *g, const char *name, uint32_t ndim, const int64_t *ne, uint32_t type, uint8_t *data,
                         size_t nbytes);

/* The size of the file tlm_gguf_write would write. */
uint64_t tlm_gguf_file_size(const tlm_gguf *g);

/* Writes the file atomically (path.tmp.XXXXXX, fsync, rename, fsync of the
 * folder); on failure path is untouched and err says why. */
bool tlm_gguf_write(const tlm_gguf *g, const char *path, tlm_err *err);

void tlm_gguf_free(tlm_gguf *g);

#endif
