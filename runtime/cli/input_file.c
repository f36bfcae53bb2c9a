/* Reading a command's input whole: a regular file, or standard input (a
 * pipe, whose size is known only at its end). */
#include "input_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "regular_file.h"

uint8_t *cli_read_input(const char *path, uint64_t max_bytes, const char *what, size_t *n, tlm_err *err) {
    if (path) return tlm_read_regular(path, max_bytes, what, n, err);
    /* never more than one byte past the limit: that byte says it is passed */
    size_t cap = max_bytes + 1 < (1 << 16) ? (size_t)max_bytes + 1 : 1 << 16, len = 0;
    uint8_t *buf = malloc(cap);
    while (buf) {
        if (len == cap) { /* len <= max_bytes here */
            cap = cap * 2 < max_bytes + 1 ? cap * 2 : (size_t)max_bytes + 1;
            uint8_t *p = realloc(buf, cap);
            if (!p) break;
            buf = p;
        }
        size_t got = fread(buf + len, 1, cap - len, stdin);
        len += got;
        if (len > max_bytes) {
            free(buf);
            return tlm_fail(err, "standard input is larger than %llu bytes, too large to be %s",
                            (unsigned long long)max_bytes, what),
                   NULL;
        }
        if (got == 0) {
            if (ferror(stdin)) {
                free(buf);
                return tlm_fail(err, "cannot read standard input: %s", strerror(errno)), NULL;
            }
            *n = len;
            return buf;
        }
    }
    free(buf);
    return tlm_fail(err, "out of memory"), NULL;
}
