/* Test-only: a crash on cue. The crash tests (tests/crash,
 * scripts/crash_campaign.sh) set
 *
 *   TLM_TEST_KILL_AT=<point>[:<n>]
 *
 * and the process kills itself with SIGKILL, as `kill -9` would, the n-th
 * time (default: the first) it reaches <point>:
 *
 *   step          a step's gradients computed, the optimizer update not yet made
 *   ckpt_write    the checkpoint half written (its temporary file, killed
 *                 inside write() once it passes half the tensor bytes)
 *   ckpt_rename   the checkpoint's temporary file complete and synced, not yet
 *                 renamed over the old one
 *   log_write     half of a JSON-lines record written and flushed
 *   log_rewrite   the log's kept records written to a temporary file (on
 *                 every start), not yet renamed over the old log
 *   nan_loss      not a crash: the trainer takes the n-th micro-batch's loss
 *                 as NaN (tests/dist: a NaN on one rank stops every rank)
 *   chain_no_wait not a crash: on a device, the n-th step's compute stream
 *                 waits for the gradient chain only after the optimizer
 *                 (tests/dist: the emulated device must then give other
 *                 parameters than one process; set it on every rank, or
 *                 the ranks' MPI collectives come in different orders)
 *   validation    not a crash: train raises SIGINT in the middle of its n-th
 *                 validation (the first is step 0's), as a Ctrl-C there would
 *   setup         not a crash: train raises SIGUSR1 once its set-up is done,
 *                 before its first step (as mpirun passing one on while the
 *                 data loads would)
 *
 * Without the variable (any normal run) every call returns at once and
 * nothing else changes. Not for use outside tests. */
#ifndef TLM_TEST_HOOK_H
#define TLM_TEST_HOOK_H

#include <stdbool.h>

/* Counts a visit to point: true when TLM_TEST_KILL_AT names it and this is
 * the n-th visit (the caller then sets the scene and calls tlm_test_kill). */
bool tlm_test_hook(const char *point);

/* Dies at once, with SIGKILL. */
_Noreturn void tlm_test_kill(void);

/* Once a file write of this process passes `bytes` (the file-size limit),
 * the write kills the process with SIGKILL instead of returning. */
void tlm_test_kill_past(long long bytes);

/* tlm_test_hook(point), then tlm_test_kill. */
void tlm_test_kill_at(const char *point);

#endif
