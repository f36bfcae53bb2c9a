/* Where the text comes from: a file or folder the user names, or the bundled
 * corpora (five Austen novels to train on, Persuasion to validate and
 * evaluate on) found in $TLM_DATA or, by default, the source tree's data/
 * folder compiled in at build time. Also where checkpoints live. */
#ifndef TLM_CLI_CORPUS_H
#define TLM_CLI_CORPUS_H

#include <stdbool.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "model_so.h"
#include "tlm_rt/data.h"

enum corpus_role { CORPUS_TRAIN, CORPUS_VALID };

/* What was loaded, beside the ids. */
typedef struct corpus_info {
    bool shards;          /* pre-tokenized shards (else text read as bytes) */
    char tokenizer[65];   /* "bytes", or the shards' tokenizer hash in hex */
    int32_t eot;          /* the shards' end-of-text id, or -1 */
    uint64_t text_bytes;  /* the text bytes the tokens encode; 0: unknown (a version-1 shard) */
    char fingerprint[48]; /* shards: "shards COUNT:FNV" of the ids; text: "" (train.c hashes the bytes) */
} corpus_info;

/* The bundled data folder: $TLM_DATA when set, else the compiled-in one. */
const char *corpus_dir(void);

/* The bundled texts the role reads when corpus_load gets no path: their
 * paths into paths[i], their count (at most CORPUS_MAX_DEFAULT). */
enum { CORPUS_MAX_DEFAULT = 8 };
int corpus_default_files(enum corpus_role role, char paths[][4096]);

/* The files corpus_load reads for path and role, which no output may
 * replace: path itself when it is a file, a folder's texts or else its
 * shards (tlm_data_folder_files), the bundled texts when path is NULL or
 * empty; *source says which. In *names (free with tlm_data_texts_free)
 * and *n; -1 + message when a folder names nothing. */
typedef enum corpus_source { CORPUS_FILE, CORPUS_FOLDER_TEXTS, CORPUS_FOLDER_SHARDS, CORPUS_BUNDLED } corpus_source;
int corpus_files(const char *path, enum corpus_role role, char ***names, int *n, corpus_source *source, tlm_err *err);

/* Whether a file the validation argument reads (val, corpus_files' for
 * CORPUS_VALID) is one the training argument (data, CORPUS_TRAIN's) reads
 * too (tlm_same_file): its name into shared, else "" there. A
 * validation loss over it measures text the model trained on. */
bool corpus_val_in_data(const char *data, const char *val, char *shared, size_t n);

/* Loads path, or the bundled text for the role when path is NULL or
 * empty, and checks that it holds a window of T + 1 tokens and only ids the
 * model's vocabulary has. path is
 *   - a token shard (a file starting with TLMSHARD, or named *.bin):
 *     memory-mapped, every id checked once (read, not mapped, so the check
 *     leaves no resident pages behind);
 *   - a folder with .txt files: text, as tlm_data_load reads it;
 *   - a folder without .txt files: its *.bin shards in name order, which
 *     must share one tokenizer and end-of-text id;
 *   - any other file: text.
 * name receives a short description for messages ("data/austen (5
 * files)"); info (may be NULL) what was loaded. */
bool corpus_load(tlm_dataset *ds, const char *path, enum corpus_role role, int64_t T, int64_t vocab, char *name,
                 size_t namelen, corpus_info *info, tlm_err *err);

/* corpus_load of path for the validation role, but whether its tokens are
 * those the checkpoint reads (corpus_same_tokenizer, whose arguments
 * follow) is asked before its length and ids: a short text for a
 * checkpoint trained on shards is refused as text, not as too short. */
bool corpus_load_for(tlm_dataset *ds, const char *path, int64_t T, int64_t vocab, char *name, size_t namelen,
                     corpus_info *info, const char *ckpt_tokenizer, const char *ckpt_path, const char *tokenizer_path,
                     tlm_err *err);

/* Whether data of info may go into a checkpoint trained on tokens of
 * ckpt_tokenizer (load_checkpoint's; ckpt_path "" for eval --check, whose
 * tokenizer is --tokenizer's): false with a message naming both, and for a
 * text where tokens are wanted, the command that makes them from path,
 * the data as given (tokenizer_path: the --tokenizer given, NULL: none). */
bool corpus_same_tokenizer(const corpus_info *info, const char *name, const char *path, const char *ckpt_tokenizer,
                           const char *ckpt_path, const char *tokenizer_path, tlm_err *err);
/* What a tokenize command names as its input for the data path given
 * (a file or a folder, which tokenize reads alike); "TEXT" for the
 * bundled data (path NULL or empty). */
const char *corpus_tokenize_input(const char *path);
/* The shard that command is told to write: the input's last name with
 * .bin added, in the current folder (not beside the text, whose folder may
 * be read-only or hold only text); "corpus.bin" for the bundled data. buf
 * holds it (len bytes) where it is not a constant. */
const char *corpus_tokenize_output(const char *path, char *buf, size_t len);
/* Room for corpus_tokenize_output's buf: a last name and ".bin". */
#define CORPUS_SHARD_NAME_BYTES (NAME_MAX + 8)

/* Whether the model may train on data of info: any data when its .tlm names
 * no tokenizer; else only shards of that tokenizer (same hash). false with
 * a message (for text: how to tokenize it). */
bool corpus_fits_model(const corpus_info *info, const char *name, const tlm_so *so, tlm_err *err);

/* The checkpoint file of a --ckpt argument: DIR/checkpoint.safetensors, or
 * the argument itself when it names a file (or ends in .safetensors);
 * checkpoints/<model>/checkpoint.safetensors when NULL. false when it
 * does not fit in out[n] (then cut short: another path, never to be used;
 * CKPT_PATH_TOO_LONG says so). */
bool checkpoint_path(char *out, size_t n, const char *ckpt, const char *model);
/* The folder part of the same (created by train). */
bool checkpoint_dir(char *out, size_t n, const char *ckpt, const char *model);
#define CKPT_PATH_TOO_LONG                                                                                     \
    "the checkpoint's path, or its name, is longer than a path (4096 bytes) or a name (255) may be here, its " \
    "temporaries' included"

#endif
