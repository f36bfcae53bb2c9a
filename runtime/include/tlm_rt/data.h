/* Training and evaluation data: a sequence of token ids.
 *
 * Text: a file, a folder of .txt files or a list of files is read into
 * memory as one byte string; token ids are the bytes (0..255).
 * Token segments: memory-mapped arrays of little-endian ids of 2 or 4 bytes
 * (the bodies of pre-tokenized shards, read by runtime/cli/corpus.c), one
 * after the other, read in place: the data is never copied, so a corpus far
 * larger than memory costs only the pages the windows touch.
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

/* One memory-mapped run of token ids; the dataset unmaps map on free. */
typedef struct tlm_data_segment {
    const uint8_t *tokens; /* count ids of width bytes each */
    uint64_t count, start; /* start: the index of its first id in the dataset */
    uint32_t width;        /* 2 or 4 */
    void *map;             /* what mmap returned, and its size */
    size_t map_size;
} tlm_data_segment;

typedef struct tlm_dataset {
    uint8_t *bytes;   /* text: the bytes, which are the ids; NULL with segments */
    size_t n;         /* the number of tokens */
    int nfiles;       /* how many files were concatenated */
    tlm_data_segment *seg;
    int nseg;
} tlm_dataset;

/* The files a data path names: the path itself, or a directory's *.txt
 * files (not recursive: subfolders are skipped, whatever their names; no dot
 * files; names sorted bytewise), in *names
 * (free with tlm_data_texts_free) and *n. -1 + message when the path does
 * not exist, the directory cannot be listed or has no .txt file. What a
 * folder of text means: training, tokenize and tokenizer train read these
 * (the shard loader, runtime/cli/corpus.c, takes a folder with such a file
 * for text by the same rule). */
int tlm_data_texts(const char *path, char ***names, int *n, tlm_err *err);
/* The files a data folder names, as training reads them: its texts
 * (tlm_data_texts) when it has a .txt file, else its *.bin token shards
 * (no dot files, names sorted bytewise), with *shards saying which; in
 * *names (free with tlm_data_texts_free) and *n. -1 + message when the
 * folder cannot be listed or names nothing. */
int tlm_data_folder_files(const char *path, char ***names, int *n, bool *shards, tlm_err *err);
/* Whether a file of this name (no folder) in a data folder is one of its
 * texts: *.txt, not a dot file. */
bool tlm_data_is_text_name(const char *name);
/* Whether path names a file directly in folder (however either is
 * spelled). */
bool tlm_path_in_folder(const char *path, const char *folder);
/* Whether a command may write out (its flag, e.g. "-o" or "--log"): false
 * with a message when out is a new file that would become one of folder's
 * texts, or one of its shards where the folder is one of shards, which the
 * next training on the folder reads (an existing one is refused as an
 * input). */
bool tlm_data_not_new_input(const char *flag, const char *out, const char *folder, tlm_err *err);
void tlm_data_texts_free(char **names, int n);
/* path's texts (tlm_data_texts) concatenated. Fails on an empty result. */
int tlm_data_load(tlm_dataset *ds, const char *path, tlm_err *err);
/* The given files, in the given order. */
int tlm_data_load_files(tlm_dataset *ds, const char *const *paths, int npaths, tlm_err *err);
void tlm_data_free(tlm_dataset *ds);

/* Appends a segment of count ids of width bytes at tokens, inside the
 * mapping map[0..map_size), which the dataset takes over (unmapped by
 * tlm_data_free, and at once when this fails). -1 + message when out of
 * memory. */
int tlm_data_add_segment(tlm_dataset *ds, void *map, size_t map_size, const uint8_t *tokens, uint64_t count,
                         uint32_t width, tlm_err *err);

/* Token i (i < ds->n). */
uint32_t tlm_data_token(const tlm_dataset *ds, size_t i);

/* 0 if the data holds at least one window of T+1 tokens, else -1 + message */
int tlm_data_check(const tlm_dataset *ds, int T, tlm_err *err);

/* B random windows: start ~ uniform [0, n - T - 1], then
 * inputs[b,t] = token[start + t], targets[b,t] = token[start + t + 1]
 * (a window may run across segments, as it runs across files).
 * inputs, targets: [B,T]. One tlm_rng_below draw per row. */
int tlm_data_sample_batch(const tlm_dataset *ds, tlm_rng *rng, int B, int T, int32_t *inputs, int32_t *targets,
                          tlm_err *err);

/* Number of non-overlapping windows for evaluation: (n - 1) / T. */
size_t tlm_data_num_windows(const tlm_dataset *ds, int T);
/* Window i of the above: tokens [i*T, i*T + T] (inputs [T], targets [T]). */
int tlm_data_window(const tlm_dataset *ds, size_t i, int T, int32_t *inputs, int32_t *targets, tlm_err *err);

#endif
