/* What eval and sample share: a model with the parameters of a checkpoint. */
#ifndef TLM_CLI_LOAD_H
#define TLM_CLI_LOAD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "device.h"
#include "model.h"
#include "tokenizer.h"

/* What eval, sample and probe do first: check a model was given, use
 * `threads` CPU threads (0: every core) and open it. Returns 0, or the exit
 * status (1, 2) after a one-line message. */
int open_model(const char *cmd, const char *path, int64_t threads, tlm_so *so);

/* tlm_threads_start (false with err), then a note on stderr when the
 * pools run fewer threads than asked: OpenBLAS's build caps them (Debian's
 * at 64), and the OpenMP pool follows it. */
bool cli_threads_start(const char *cmd, int threads, tlm_err *err);

/* The one-line refusal (1) of a checkpoint path longer than the system
 * takes: --ckpt's (ckpt), or the default checkpoints/<model> (NULL). */
int checkpoint_path_too_long(const char *cmd, const char *ckpt, const char *model);

/* Finds the checkpoint of --ckpt (DIR or file; NULL: checkpoints/<model>),
 * checks it belongs to so and copies its parameters into m. Returns 0, or 1
 * after a one-line message. path receives the file, step its step (-1
 * where its metadata holds no valid one: step_text shows it), and
 * tokenizer (when not NULL) the identity of the tokenizer of the data it
 * was trained on: its metadata's `tokenizer`, "bytes" when it has none
 * (checkpoints from before shards were all trained on text as bytes),
 * and trained (when not NULL) the longest window it was trained on, -1 if
 * unrecorded (tlm_ckpt_trained_context). */
int load_checkpoint(const char *cmd, const tlm_so *so, const char *ckpt, tlm_model *m, char *path, size_t pathlen,
                    int64_t *step, char tokenizer[65], int64_t *trained);

/* A note on stderr, after a run's results (so that an error stays one
 * line), when windows of `window` tokens ran a checkpoint trained on
 * shorter ones (trained, load_checkpoint's; -1: unknown): its
 * weights never saw the positions past them (a model may be recompiled for
 * a longer context, and RoPE runs at any position), so a loss or sample
 * there says how it extrapolates. */
void note_untrained_positions(const char *cmd, const char *path, int64_t trained, int64_t window);

/* Why a checkpoint's outputs are not finite, as the end of a message: "did
 * the run of PATH diverge?", or for one at step 0 (no update made)
 * "PATH is untrained (step 0): the model's settings make its initial
 * weights diverge" with a hint for a Titans model (its inner_lr). Returns
 * buf. */
const char *nan_cause(const tlm_so *so, const char *path, int64_t step, char *buf, size_t n);

/* " (a Titans inner_lr too large?)" for a Titans model, whose memory
 * diverges at initialization when inner_lr is far past stability; "" for
 * the others: the hint of a NaN of the initial weights. */
const char *untrained_nan_hint(const tlm_so *so);

/* A checkpoint's step as the banners print it: the number, or "unknown"
 * for load_checkpoint's -1. Returns buf. */
const char *step_text(int64_t step, char buf[24]);

/* The tokenizer that text for a checkpoint goes through, from --tokenizer
 * (tok_path, or NULL), else so's own, and the checkpoint's `tokenizer`
 * (load_checkpoint's).
 * A checkpoint trained on bytes takes none (*tok NULL; a --tokenizer is
 * refused, as its ids would mean nothing to the model); one trained on
 * subword tokens needs the tokenizer whose hash it records. 0, or 1 after
 * a one-line message. */
int load_checkpoint_tokenizer(const char *cmd, const char *tok_path, const tlm_so *so, const char *ckpt_tokenizer,
                              const char *ckpt_path, tlm_tokenizer **tok);

/* Opens the device a checked --device names: *dev NULL for the CPU. 0, or 1
 * after a message (no driver, no such GPU). */
int device_flag_open(const char *cmd, const char *value, tlm_device **dev);
/* The one-line description of where a command runs, for its banner. */
void device_flag_describe(const tlm_device *dev, char *buf, size_t len);

/* ", on cuda:0 NAME (...), bf16" after a banner where dev is a GPU (NULL:
 * nothing): a GPU's figures differ from the CPU's, so which ran is said. */
void print_device_suffix(const tlm_device *dev, tlm_precision p);
/* The line a GPU run's header adds (docs/gpu.md "Using it"): which
 * attention kernels so runs on dev in precision p, and whether CUDA graphs
 * are on, each with why not ("attention: scalar (fp32); CUDA graphs: off
 * (--profile)"). graphs_off: tlm_gpu_graphs_off_reason's, NULL when on. */
void device_kernels_describe(const tlm_so *so, const tlm_device *dev, tlm_precision p, const char *graphs_off,
                             char *buf, size_t len);
/* The line after it: where a GPU model's kernels came from, compiled (in
 * how long) or all from the cache, as a second run of the same model
 * finds them (docs/gpu.md "The kernel cache"). */
void device_compile_report(const tlm_model *m, FILE *out);

#endif
