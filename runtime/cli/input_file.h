/* The whole of a file a command reads as its input, or of standard input. */
#ifndef TLM_CLI_INPUT_FILE_H
#define TLM_CLI_INPUT_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "errmsg.h"

/* The whole of path (a regular file: tlm_read_regular), or of standard
 * input when path is NULL, malloc'd (never NULL on success, even when
 * empty), *n its length. More than max_bytes is refused with a message
 * saying it is too large to be `what`. NULL with a one-line reason. */
uint8_t *cli_read_input(const char *path, uint64_t max_bytes, const char *what, size_t *n, tlm_err *err);

#endif
