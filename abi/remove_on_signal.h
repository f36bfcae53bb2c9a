/* Paths that an interrupt removes: a command's temporaries (an output being
 * written beside its target, tlmc's object files), so that SIGINT, SIGTERM,
 * SIGHUP, SIGQUIT, SIGPIPE, SIGALRM, SIGUSR1 or SIGUSR2 leaves nothing
 * behind. (SIGKILL cannot be caught: what it leaves
 * is named PATH.tmp.XXXXXX, which tlm_remove_stale_temps (atomic_file.h) knows.)
 *
 * The handler is installed only for the signals whose disposition is still
 * the default when the first path is added: a command with handlers of its
 * own (train, study) stops on its own terms, finishes or removes its own
 * writes, and keeps them. The handler removes the paths, newest first (a
 * folder after the files in it; unlink, then rmdir), restores the default
 * disposition and raises the signal again, so the exit status still says
 * which signal ended the process. */
#ifndef TLM_REMOVE_ON_SIGNAL_H
#define TLM_REMOVE_ON_SIGNAL_H

#include <stdbool.h>
#include <signal.h>
#include <sys/types.h>

/* Removes path if one of those signals ends the process. False when the
 * table is full (16 paths) or the path is too long: the path is then not
 * removed on an interrupt, and the caller goes on. */
bool tlm_remove_on_signal(const char *path);

/* Forgets path (it was renamed into place, or removed). */
void tlm_keep_on_signal(const char *path);

/* Removes the paths now (and stops the child below), from a handler of a
 * command's own that ends the process at once (train's second signal): a
 * checkpoint's temporary being written is gone with it. Async-signal-safe. */
void tlm_remove_registered_now(void);

/* A child writing one of those paths (tlmc's linker): the handler stops it
 * (SIGTERM, then SIGKILL after 2 s) and waits for it before removing them;
 * otherwise it outlived the command and wrote its output after the
 * removal. 0: none any more. One at a time. */
void tlm_stop_child_on_signal(pid_t child);

/* The signals the handler takes (in set), for a caller that holds them
 * while it starts such a child. */
void tlm_signals_handled(sigset_t *set);

#endif
