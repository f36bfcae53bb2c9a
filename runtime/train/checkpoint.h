/* Training checkpoints: one safetensors file that PyTorch can read as a
 * Llama-style state dict and that tlm-run can resume from bit for bit.
 *
 * Tensors:
 *   <param name>                       F32, every entry of the parameter table
 *                                      (Llama names; a tied head is not repeated)
 *   optimizer.exp_avg.<name>           F32, AdamW's first moment
 *   optimizer.exp_avg_sq.<name>        F32, AdamW's second moment
 *   optimizer.momentum_buffer.<name>   F32, SGD's momentum (instead of the two above)
 *   optimizer.grad_sum.<name>          F32, a parameter updated every `period` > 1 steps:
 *                                      its gradients summed since its last update
 *   train.step                         I64 [1], optimizer steps taken
 *   train.tokens_seen                  I64 [1]
 *   train.data_rng                     I64 [4], the training sampler's generator
 *
 * __metadata__ (strings): format, model, abi_version, param_fingerprint,
 * step, tokens_seen, elapsed, optimizer, config (the architecture as JSON:
 * vocab, d_model, heads, widths, ...), plus what the caller adds (the
 * settings as JSON, ...), and checksum: over every tensor (name, dtype and
 * shape by FNV-1a 64, bytes by a sum of mixed 64-bit words: checkpoint.c)
 * and every other metadata entry, so that a flipped byte anywhere is caught
 * rather than trained on. */
#ifndef TLM_CHECKPOINT_H
#define TLM_CHECKPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "atomic_file.h" /* tlm_write_file_atomic, tlm_sync_dir_of: callers of this header use them */
#include "model_so.h"
#include "tlm_rt/rng.h"
#include "tlm_rt/safetensors.h"
#include "trainer.h"

#define TLM_CKPT_FORMAT "tlm-checkpoint-1"
#define TLM_CKPT_FILE "checkpoint.safetensors"

/* The state of a run besides the tensors of the model and optimizer. */
typedef struct tlm_run_state {
    int64_t step;           /* optimizer steps taken */
    int64_t tokens_seen;
    tlm_rng data_rng;       /* the training sampler, after the last step's batch */
    double elapsed;         /* wall seconds of training so far, across resumes */
} tlm_run_state;

/* Whether path is a regular file whose safetensors header names the
 * checkpoint format. Reads the header only: a file named by mistake (a
 * model.so, a corpus) may be large. */
bool tlm_ckpt_file_is_checkpoint(const char *path);

/* FNV-1a 64, continuing from h (start with TLM_FNV_OFFSET). */
#define TLM_FNV_OFFSET 0xcbf29ce484222325ull
uint64_t tlm_fnv1a(uint64_t h, const void *data, size_t n);

/* Names and shapes of the parameter table, hashed: two models whose
 * checkpoints are interchangeable have the same fingerprint. */
uint64_t tlm_param_fingerprint(const tlm_so *so);

/* The "checksum" entry's text for these tensors (their bytes by their
 * shape, not nbytes) and metadata, the metadata's own "checksum" entry left
 * out: what tlm_ckpt_save writes and tlm_ckpt_open expects. False when out
 * of memory. */
#define TLM_CKPT_CHECKSUM_LEN 32
bool tlm_ckpt_checksum(const tlm_st_tensor *ts, int nt, const tlm_st_meta *meta, int nm,
                       char out[TLM_CKPT_CHECKSUM_LEN]);

/* Writes the model's parameters, the trainer's optimizer state, the run
 * state and extra metadata to path, atomically (the old file stays valid
 * until the new one is renamed over it): the bytes go to a temporary file
 * path.tmp.XXXXXX in the same folder (tlm_st_write's own temporary inside
 * it is path.tmp.XXXXXX.tmp.YYYYYY), fsynced, then renamed over path. A
 * failed write (a full disk, a file-size limit) removes its temporary and
 * leaves path as it was. */
bool tlm_ckpt_save(const char *path, const tlm_trainer *t, const tlm_run_state *st, const tlm_st_meta *extra,
                   int nextra, tlm_err *err);

/* Opens a checkpoint and checks it belongs to this model: the format, the
 * checksum, the model's name, the ABI version, and every parameter's name
 * and shape. NULL with a one-line reason otherwise. */
tlm_st_file *tlm_ckpt_open(const char *path, const tlm_so *so, tlm_err *err);

/* The metadata's "step" (what eval, sample and --dry-run show): true with
 * *step set when it is a whole number >= 0, written as the writer writes
 * it; false, *step = -1, for anything else (absent, "12abc", "-3", past
 * int64). Resume reads the train.step tensor, not this. */
bool tlm_ckpt_meta_step(const tlm_st_file *f, int64_t *step);

/* Copies the parameters into the model (which must be of the same so). */
bool tlm_ckpt_load_params(const tlm_st_file *f, tlm_model *m, tlm_err *err);

/* The largest train.step and train.tokens_seen a checkpoint may hold: the
 * most steps a run takes (2^40, tlm_train_settings.h), and 2^62 tokens,
 * far above any run's and below 2^63 by more than a run adds to it
 * (train checks the steps it will add, too). */
#define TLM_CKPT_MAX_STEP ((int64_t)1 << 40)
#define TLM_CKPT_MAX_TOKENS ((int64_t)1 << 62)

/* Copies the optimizer state into the trainer (its optimizer decides which
 * tensors are needed) and reads the run state, refusing a step or token
 * count out of range (above) or other than the metadata's "step" and
 * "tokens_seen"; also sets t->step. */
bool tlm_ckpt_load_trainer(const tlm_st_file *f, tlm_trainer *t, tlm_run_state *st, tlm_err *err);

#endif
