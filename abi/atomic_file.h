/* Writing an output file whole or not at all: the one way tlmc and the
 * runtime write a file the user named (model.so, checkpoints, shards,
 * tokenizers, GGUF files, logs, a study's files).
 *
 * The bytes go to a temporary PATH.tmp.XXXXXX in the target's folder (its
 * mode that of the file it replaces, or what a plain create gives), are
 * fsynced, and the temporary is renamed over the target, then the folder is
 * fsynced: a reader sees the old file or the new one, never part of one. A
 * failure removes the temporary and leaves the target as it was; so does an
 * interrupt (remove_on_signal.h), and what a SIGKILL leaves is named so
 * that tlm_remove_stale_temps (below) knows it.
 *
 * The target is refused up front when it is a directory, a device, a FIFO
 * or a socket (a rename would replace the node itself: `-o /dev/null` once
 * made /dev/null a regular file), and a symbolic link is followed: the file
 * it names is replaced and the link stays. */
#ifndef TLM_ATOMIC_FILE_H
#define TLM_ATOMIC_FILE_H

#include <stdbool.h>
#include <stddef.h>

#include "errmsg.h"

typedef struct tlm_atomic_file {
    int fd;             /* the temporary, open for writing */
    char target[4096];  /* what the rename replaces: path, or the file a link at path names */
    char tmp[4200];
} tlm_atomic_file;

/* Checks the target and creates the temporary; false with a reason naming
 * path. */
bool tlm_atomic_open(tlm_atomic_file *f, const char *path, tlm_err *err);

/* The check tlm_atomic_open makes of path before it creates anything (a
 * folder, FIFO or device, a dangling symbolic link, a standard stream's
 * file): for an output written long after the command starts (train's
 * checkpoint), so that it fails before the work, not after it. */
bool tlm_atomic_target_ok(const char *path, tlm_err *err);

/* The same, for a temporary another program writes through a temporary of
 * its own named after it, `spare` bytes longer (lld's TMP.tmpXXXXXXX): the
 * temporary's name leaves them under the longest name a folder takes. */
bool tlm_atomic_open_spare(tlm_atomic_file *f, const char *path, size_t spare, tlm_err *err);

/* fsync, close, rename over the target, fsync the folder; false with a
 * reason (the temporary removed, the target as it was). */
bool tlm_atomic_commit(tlm_atomic_file *f, tlm_err *err);

/* The same, but the descriptor stays open on the renamed file, the
 * caller's to append to and close (the training log). */
bool tlm_atomic_publish(tlm_atomic_file *f, tlm_err *err);

/* Closes and removes the temporary; the target stays as it was. */
void tlm_atomic_abort(tlm_atomic_file *f);

/* bytes[0..n) as the file path, by the three calls above. */
bool tlm_write_file_atomic(const char *path, const void *bytes, size_t n, tlm_err *err);

/* Writes all n bytes to fd, again after a short write or EINTR; false
 * with errno set (ENOSPC where write() wrote nothing and said no error). */
bool tlm_write_all(int fd, const void *bytes, size_t n);

/* Whether a and b are one file: both exist and share device and inode
 * (also through links and different spellings of a path), or neither
 * exists yet and both name one place (the real path of each one's nearest
 * existing folder, then the rest as written: a folder not yet made
 * counts). */
bool tlm_same_file(const char *a, const char *b);

/* Refuses an output that is one of the command's inputs, which the rename
 * would destroy: false with "OUT is also WHAT ..." when tlm_same_file(out,
 * in); true when in is NULL. */
bool tlm_output_not_input(const char *out, const char *in, const char *what, tlm_err *err);

/* Removes what a crash (kill -9, power loss) during an atomic write of path
 * left behind: the regular files of path's folder named path.tmp.XXXXXX or
 * path.tmp.XXXXXX.tmp.YYYYYY (XXXXXX: six letters or digits), nothing else.
 * Only safe while no other process writes path (tlm-run train locks the
 * checkpoint folder). The number removed, or -1 with a reason. */
int tlm_remove_stale_temps(const char *path, tlm_err *err);

/* fsync of path's folder (after a rename, to make it durable). */
bool tlm_sync_dir_of(const char *path);

#endif
