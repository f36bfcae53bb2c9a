/* The study's files: read whole, the folders made on the way, and the
 * last line of a log. They are written with tlm_write_file_atomic
 * (atomic_file.h): a kill at any moment leaves the old file or the new one,
 * never half of one. */
#ifndef TLM_STUDY_FILES_H
#define TLM_STUDY_FILES_H

#include <stdbool.h>
#include <stddef.h>

#include "atomic_file.h"
#include "tlm_rt/error.h"

/* The whole regular file, NUL-terminated (malloc'd), *n its length; NULL
 * with a reason (also when it does not exist: errno is then ENOENT). */
char *study_read_file(const char *path, size_t *n, tlm_err *err);
/* mkdir -p. */
bool study_make_dirs(const char *path, tlm_err *err);
/* The last non-empty line of a log (controls blanked), for a one-line
 * message; "(no output)" when there is none. */
void study_last_line(const char *path, char *out, size_t n);
/* path's first len bytes as a child's command line can take them: "./"
 * before a relative path that starts with '-' (`-dash/models/a.so` would be
 * read as the child's options). false when it does not fit in out[n]. */
bool study_child_path(const char *path, size_t len, char *out, size_t n);
/* Whether path exists (as anything). */
bool study_exists(const char *path);
/* The SHA-256 of the file at path in hex (a model.so: what the study's
 * records name it by), or false with a reason. */
bool study_file_sha256(const char *path, char hex[65], tlm_err *err);

#endif
