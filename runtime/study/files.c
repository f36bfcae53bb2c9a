/* Atomic writes, whole reads and folders for the study (files.h). */
#include "files.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint.h"
#include "regular_file.h"
#include "sha256.h"

char *study_read_file(const char *path, size_t *n, tlm_err *err) {
    struct stat st;
    if (stat(path, &st) != 0) {
        int e = errno;
        tlm_fail(err, "%s: %s", path, strerror(e));
        errno = e;
        return NULL;
    }
    size_t size;
    uint8_t *bytes = tlm_read_regular(path, (uint64_t)1 << 30, "read here", &size, err);
    if (!bytes) return NULL;
    char *text = realloc(bytes, size + 1);
    if (!text) {
        free(bytes);
        tlm_fail(err, "out of memory");
        return NULL;
    }
    text[size] = '\0';
    *n = size;
    errno = 0;
    return text;
}

bool study_make_dirs(const char *path, tlm_err *err) {
    char buf[4200];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return tlm_fail(err, "%s: the path is too long", path);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || !*p) {
            char c = *p;
            *p = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return tlm_fail(err, "%s: cannot make the folder: %s", buf, strerror(errno));
            struct stat st;
            if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode)) return tlm_fail(err, "%s is not a folder", buf);
            if (!c) break;
            *p = c;
        }
    }
    return true;
}

bool study_file_sha256(const char *path, char hex[65], tlm_err *err) {
    uint8_t digest[TLM_SHA256_SIZE];
    if (!tlm_sha256_file(path, digest)) return tlm_fail(err, "%s: %s", path, strerror(errno));
    tlm_sha256_hex(digest, hex);
    return true;
}

bool study_child_path(const char *path, size_t len, char *out, size_t n) {
    const char *lead = path[0] == '-' ? "./" : "";
    if (strlen(lead) + len >= n) return false;
    snprintf(out, n, "%s%.*s", lead, (int)len, path);
    return true;
}

bool study_exists(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0;
}

static void fit(char *out, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    tlm_vformat_fit(out, n, fmt, ap);
    va_end(ap);
}

void study_last_line(const char *path, char *out, size_t n) {
    size_t len = 0;
    tlm_err e;
    char *text = study_read_file(path, &len, &e);
    snprintf(out, n, "(no output)");
    if (!text) return;
    while (len && (text[len - 1] == '\n' || text[len - 1] == '\r' || text[len - 1] == ' ')) len--;
    size_t start = len;
    while (start && text[start - 1] != '\n') start--;
    for (size_t i = start; i < len; i++)
        if ((unsigned char)text[i] < ' ') text[i] = ' ';
    /* a line too long keeps its start and its end (the reason), and whole
     * UTF-8 characters */
    if (len > start) fit(out, n, "%.*s", (int)(len - start), text + start);
    free(text);
}
