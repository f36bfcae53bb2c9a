/* The study's child processes (tlmc, tlm-run train/eval/probe, a PNG
 * converter). Each runs in a process group of its own, so a Ctrl-C at the
 * terminal reaches only the runner, which passes it on once (a second
 * SIGINT would make `tlm-run train` stop without its checkpoint); and each
 * gets SIGTERM when the runner dies (PR_SET_PDEATHSIG), so a runner killed
 * with SIGKILL leaves no training behind holding its checkpoint's lock. */
#ifndef TLM_STUDY_SPAWN_H
#define TLM_STUDY_SPAWN_H

#include <stdbool.h>
#include <sys/types.h>

#include "tlm_rt/error.h"

/* Starts argv (argv[0] a path, or a name looked up in PATH) with stdin
 * from /dev/null, stdout into out_path (appended to or truncated; NULL:
 * /dev/null) and stderr into err_path (NULL: where stdout goes). The
 * child's pid, or -1 with a reason. */
pid_t study_spawn(char *const argv[], const char *out_path, bool append, const char *err_path, tlm_err *err);

/* Runs argv to its end (as study_spawn) and returns its exit status (a
 * signal's death: 128 + the signal), or -1 with a reason when it could not
 * start. Signals that arrive meanwhile are the caller's to look at. */
int study_run_child(char *const argv[], const char *out_path, bool append, const char *err_path, tlm_err *err);

/* The exit status waitpid's status stands for (128 + signal when killed). */
int study_exit_status(int status);

#endif
