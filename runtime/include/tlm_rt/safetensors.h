/* safetensors files (https://huggingface.co/docs/safetensors):
 *
 *   [8 bytes: N, little-endian u64][N bytes: JSON header][data]
 *
 * The header maps each tensor name to {"dtype", "shape", "data_offsets":
 * [begin, end]} (offsets relative to the data section), plus an optional
 * "__metadata__" map of strings to strings. Checkpoints use it so PyTorch
 * users can load them; so do the reference tests.
 *
 * The writer is atomic: it writes a temporary file in the target's
 * directory, fsyncs it, renames it over the target and fsyncs the directory,
 * so a crash leaves either the old file or the new one, never a mix.
 *
 * The reader checks everything before handing out a tensor: header length
 * within the file (and <= 100 MB, as the reference implementation), JSON
 * syntax, every entry's fields, a known dtype, shape and byte size in
 * agreement, offsets inside the data section, and the tensors tiling the
 * data section exactly (sorted by offset, no overlap, no gap), as the
 * reference implementation requires. Any violation: NULL + message. */
#ifndef TLM_RT_SAFETENSORS_H
#define TLM_RT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "tlm_rt/error.h"

typedef enum tlm_dtype {
    TLM_F32,
    TLM_F64,
    TLM_F16,
    TLM_BF16,
    TLM_I64,
    TLM_I32,
    TLM_I16,
    TLM_I8,
    TLM_U8,
    TLM_BOOL,
} tlm_dtype;

const char *tlm_dtype_name(tlm_dtype t); /* "F32", ... */
size_t tlm_dtype_size(tlm_dtype t);      /* bytes per element */

#define TLM_ST_MAX_DIMS 8

typedef struct tlm_st_tensor {
    const char *name;
    tlm_dtype dtype;
    int ndim; /* 0 = scalar */
    int64_t shape[TLM_ST_MAX_DIMS];
    const void *data; /* nbytes bytes; not necessarily aligned for dtype */
    size_t nbytes;    /* ignored by the writer: it derives it from shape */
} tlm_st_tensor;

typedef struct tlm_st_meta {
    const char *key, *value;
} tlm_st_meta;

/* Writes tensors[0..n) (in that order) and the metadata to path, atomically
 * (atomic_file.h).
 * Names must be distinct, non-empty and not "__metadata__". */
int tlm_st_write(const char *path, const tlm_st_tensor *tensors, int n, const tlm_st_meta *meta, int nmeta,
                 tlm_err *err);
/* The same file written to fd (from its current offset) and fsynced, for a
 * caller that manages its own temporary and rename; name is for messages. */
int tlm_st_write_fd(int fd, const char *name, const tlm_st_tensor *tensors, int n, const tlm_st_meta *meta, int nmeta,
                    tlm_err *err);

typedef struct tlm_st_file tlm_st_file;

/* Reads and validates the whole file into memory. */
tlm_st_file *tlm_st_open(const char *path, tlm_err *err);
/* The same from bytes in memory (copied). */
tlm_st_file *tlm_st_parse(const void *bytes, size_t len, tlm_err *err);
void tlm_st_close(tlm_st_file *f);

int tlm_st_count(const tlm_st_file *f);
/* Tensors in the order of their offsets. */
const tlm_st_tensor *tlm_st_at(const tlm_st_file *f, int i);
const tlm_st_tensor *tlm_st_find(const tlm_st_file *f, const char *name);
/* __metadata__ value for key, or NULL */
const char *tlm_st_meta_get(const tlm_st_file *f, const char *key);
int tlm_st_meta_count(const tlm_st_file *f);
const tlm_st_meta *tlm_st_meta_at(const tlm_st_file *f, int i);

/* Copies tensor `name` into dst after checking that it exists with this
 * dtype and shape (ndim entries); a clear message otherwise. */
int tlm_st_read(const tlm_st_file *f, const char *name, tlm_dtype dtype, int ndim, const int64_t *shape, void *dst,
                tlm_err *err);

#endif
