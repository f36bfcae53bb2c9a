/* Where the text comes from: a file or folder the user names, or the bundled
 * corpora (five Austen novels to train on, Persuasion to validate and
 * evaluate on) found in $TLM_DATA or, by default, the source tree's data/
 * folder compiled in at build time. Also where checkpoints live. */
#ifndef TLM_CLI_CORPUS_H
#define TLM_CLI_CORPUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tlm_rt/data.h"

enum corpus_role { CORPUS_TRAIN, CORPUS_VALID };

/* The bundled data folder: $TLM_DATA when set, else the compiled-in one. */
const char *corpus_dir(void);

/* Loads path (a file, or a folder of .txt files), or the bundled text for
 * the role when path is NULL or empty, and checks that it holds a window of
 * T + 1 tokens and only bytes the model's vocabulary has. name receives a
 * short description for messages ("data/austen (5 files)"). */
bool corpus_load(tlm_dataset *ds, const char *path, enum corpus_role role, int64_t T, int64_t vocab, char *name,
                 size_t namelen, tlm_err *err);

/* The checkpoint file of a --ckpt argument: DIR/checkpoint.safetensors, or
 * the argument itself when it names a file (or ends in .safetensors);
 * checkpoints/<model>/checkpoint.safetensors when NULL. */
void checkpoint_path(char *out, size_t n, const char *ckpt, const char *model);
/* The folder part of the same (created by train). */
void checkpoint_dir(char *out, size_t n, const char *ckpt, const char *model);

#endif
