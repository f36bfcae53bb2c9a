/* Opening a file the user named, for reading, only when it is a regular
 * file. A FIFO, device, socket or directory is refused before any open that
 * could block (opening a FIFO for reading waits for a writer forever; a
 * device may never end), with a message naming what the path is. The
 * runtime and tlmc open every input path through here; standard input is
 * read only where a command documents it. */
#ifndef TLM_REGULAR_FILE_H
#define TLM_REGULAR_FILE_H

#include <stdint.h>
#include <stdio.h>
#include "errmsg.h"

/* A read-only descriptor for path (O_CLOEXEC), or -1 with a one-line reason
 * in err. The file type is checked with stat before opening and with fstat
 * after (the open itself is non-blocking, so a FIFO swapped in between
 * cannot hang it). */
int tlm_open_regular(const char *path, tlm_err *err);

/* The same as a FILE opened "rb", or NULL with a reason in err. */
FILE *tlm_fopen_regular(const char *path, tlm_err *err);

/* The whole of a regular file, read once: malloc'd (never NULL on
 * success, even when empty), *size its length. A file over max_bytes is
 * refused unread, with a message saying it is too large to be `what`.
 * NULL with a reason in err. */
uint8_t *tlm_read_regular(const char *path, uint64_t max_bytes, const char *what, size_t *size, tlm_err *err);
/* The same from fd, a descriptor tlm_open_regular gave for path (read from
 * its start, whatever its offset; left open). */
uint8_t *tlm_read_regular_fd(int fd, const char *path, uint64_t max_bytes, const char *what, size_t *size,
                             tlm_err *err);

/* What st_mode is, in words ("a FIFO", "a directory", ...), for messages. */
const char *tlm_file_kind(unsigned mode);

struct stat;
/* "output" or "error" when st is the file standard output or error is open
 * on (`-o /dev/stdout >> f`: the path resolves to f, which an output
 * renamed into place would replace, the stream left on the old file), else
 * NULL. */
const char *tlm_std_stream_file(const struct stat *st);

#endif
