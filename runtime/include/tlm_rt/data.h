/* Byte-level text data: a file, a folder of .txt files or a list of files is
 * read into memory as one byte string; token ids are the bytes (0..255).
 * Training draws random windows of T+1 tokens with a tlm_rng (its state
 * belongs in the checkpoint); evaluation walks windows in order. Every
 * failure (missing, unreadable, empty, too short) returns -1 with a message
 * naming the path; nothing aborts. */
#ifndef TLM_RT_DATA_H
#define TLM_RT_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "tlm_rt/error.h"
#include "tlm_rt/rng.h"

typedef struct tlm_dataset {
    uint8_t *bytes;
    size_t n;
    int nfiles; /* how many files were concatenated */
} tlm_dataset;

/* path: a regular file, or a directory whose *.txt files (not recursive,
 * names sorted bytewise) are concatenated. Fails on an empty result. */
int tlm_data_load(tlm_dataset *ds, const char *path, tlm_err *err);
/* The given files, in the given order. */
int tlm_data_load_files(tlm_dataset *ds, const char *const *paths, int npaths, tlm_err *err);
void tlm_data_free(tlm_dataset *ds);

/* 0 if the data holds at least one window of T+1 tokens, else -1 + message */
int tlm_data_check(const tlm_dataset *ds, int T, tlm_err *err);

/* B random windows: start ~ uniform [0, n - T - 1], then
 * inputs[b,t] = bytes[start + t], targets[b,t] = bytes[start + t + 1].
 * inputs, targets: [B,T]. One tlm_rng_below draw per row. */
int tlm_data_sample_batch(const tlm_dataset *ds, tlm_rng *rng, int B, int T, int32_t *inputs, int32_t *targets,
                          tlm_err *err);

/* Number of non-overlapping windows for evaluation: (n - 1) / T. */
size_t tlm_data_num_windows(const tlm_dataset *ds, int T);
/* Window i of the above: tokens [i*T, i*T + T] (inputs [T], targets [T]). */
int tlm_data_window(const tlm_dataset *ds, size_t i, int T, int32_t *inputs, int32_t *targets, tlm_err *err);

#endif
