/* The study's child processes (tlmc, tlm-run train/eval/probe, a PNG
 * converter). Each runs in a process group of its own, so a Ctrl-C at the
 * terminal reaches only the runner, which passes each signal on to the
 * whole group (a wrapper script and the program it started alike): the
 * first makes `tlm-run train` stop after its step with a checkpoint, the
 * second at once, as they would at a terminal; a third is SIGKILL, for a
 * child that ignores the others. Each child gets SIGTERM when the runner
 * dies (PR_SET_PDEATHSIG), so a runner killed with SIGKILL leaves no
 * training behind holding its checkpoint's lock. */
#ifndef TLM_STUDY_SPAWN_H
#define TLM_STUDY_SPAWN_H

#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>

#include "tlm_rt/error.h"

/* Starts argv (argv[0] a path, or a name looked up in PATH) with stdin
 * from /dev/null, stdout into out_path (appended to or truncated; NULL:
 * /dev/null) and stderr into err_path (NULL: where stdout goes). Both are
 * opened here, before the fork, and must be regular files or new ones (a
 * FIFO, folder, device or dangling link is refused naming its path). The
 * child's pid, or -1 with a reason. */
pid_t study_spawn(char *const argv[], const char *out_path, bool append, const char *err_path, tlm_err *err);

/* What the runner's SIGINT and SIGTERM handler records. */
typedef struct study_stop {
    volatile sig_atomic_t sig;   /* the last one (0: none yet) */
    volatile sig_atomic_t count; /* how many have come */
} study_stop;

/* Passes signals number from + 1 to `to` (counted as stop->count counts
 * them) on to pid's process group: the first two as the signal the runner
 * received last (SIGINT or SIGTERM), the third and later as SIGKILL. */
void study_pass_signals(pid_t pid, const study_stop *stop, int from, int to);

/* Runs argv to its end (as study_spawn) and returns its exit status (a
 * signal's death: 128 + the signal), or -1 with a reason when it could not
 * start. Every signal stop records meanwhile (stop may be NULL) is passed
 * on to the child as it comes; what the caller makes of the stop is its
 * own. */
int study_run_child(char *const argv[], const char *out_path, bool append, const char *err_path, const study_stop *stop,
                    tlm_err *err);

/* The exit status waitpid's status stands for (128 + signal when killed). */
int study_exit_status(int status);

#endif
