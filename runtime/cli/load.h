/* What eval and sample share: a model with the parameters of a checkpoint. */
#ifndef TLM_CLI_LOAD_H
#define TLM_CLI_LOAD_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

/* What eval, sample and probe do first: check a model was given, use
 * `threads` CPU threads (0: every core) and open it. Returns 0, or the exit
 * status (1, 2) after a one-line message. */
int open_model(const char *cmd, const char *path, int64_t threads, tlm_so *so);

/* Finds the checkpoint of --ckpt (DIR or file; NULL: checkpoints/<model>),
 * checks it belongs to so and copies its parameters into m. Returns 0, or 1
 * after a one-line message. path receives the file, step its step. */
int load_checkpoint(const char *cmd, const tlm_so *so, const char *ckpt, tlm_model *m, char *path, size_t pathlen,
                    int64_t *step);

#endif
