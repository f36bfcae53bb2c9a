#include "source.h"
#include "utf8.h"
#include "xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void source_table_free(source_table *t) {
    for (int i = 0; i < t->count; i++) {
        source *s = t->files[i];
        free(s->name);
        free(s->path);
        free(s->text);
        free(s->line_starts);
        free(s);
    }
    free(t->files);
    t->files = NULL;
    t->count = t->cap = 0;
}

int source_add(source_table *t, const char *name, const char *path, char *text, size_t len) {
    if (t->count == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 8;
        t->files = tlm_xrealloc(t->files, (size_t)t->cap * sizeof *t->files);
    }
    source *s = tlm_xcalloc(1, sizeof *s);
    s->name = tlm_xstrdup(name ? name : "");
    s->path = tlm_xstrdup(path ? path : name ? name : "");
    s->text = text;
    s->len = len;
    t->files[t->count] = s;
    return t->count++;
}

/* Reads the whole of fd into *out (NUL-terminated), *len bytes; false with
 * *why. The descriptor is non-blocking (see source_load): where a pipe's
 * writer has not written yet, poll waits for it. */
static bool read_all(int fd, size_t first, char **out, size_t *len, const char **why) {
    /* first + 2: room for the file, its NUL and one byte more, so that the
     * read that finds the end needs no larger buffer (a file of exactly the
     * limit would otherwise be refused before its end was seen). */
    size_t cap = first > 0 ? first + 2 : 4096, n = 0;
    char *buf = tlm_xmalloc(cap);
    for (;;) {
        if (n + 1 >= cap) {
            if (cap > TLM_MAX_SOURCE_BYTES) {
                *why = "file too large (the limit is 64 MiB)";
                free(buf);
                return false;
            }
            buf = tlm_xrealloc(buf, cap * 2);
            cap *= 2;
        }
        ssize_t r = read(fd, buf + n, cap - 1 - n);
        if (r > 0) {
            n += (size_t)r;
            continue;
        }
        if (r == 0) break;
        if (errno == EINTR) continue;
        if (errno == EAGAIN) {
            struct pollfd p = {.fd = fd, .events = POLLIN};
            if (poll(&p, 1, -1) >= 0 || errno == EINTR) continue;
        }
        *why = strerror(errno);
        free(buf);
        return false;
    }
    if (n > TLM_MAX_SOURCE_BYTES) {
        *why = "file too large (the limit is 64 MiB)";
        free(buf);
        return false;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return true;
}

int source_load(source_table *t, const char *name, const char *path, const char **why) {
    /* Non-blocking, so that a FIFO nobody writes to reads as empty instead
     * of waiting forever; a pipe with a writer (process substitution,
     * <(...)) is read to its end. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        *why = strerror(errno);
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        *why = strerror(errno);
        close(fd);
        return -1;
    }
    if (S_ISDIR(st.st_mode)) {
        *why = "is a directory";
        close(fd);
        return -1;
    }
    /* Read in chunks rather than trusting st_size: pipes and /proc files
     * report 0, and a file may change while we read it. The first buffer is
     * no bigger than the limit, so a huge file is "too large", not an
     * allocation failure. */
    size_t first = st.st_size > TLM_MAX_SOURCE_BYTES ? TLM_MAX_SOURCE_BYTES : (size_t)st.st_size, len;
    char *buf;
    bool ok = read_all(fd, first, &buf, &len, why);
    close(fd);
    if (!ok) return -1;
    if (len == 0 && S_ISFIFO(st.st_mode)) {
        *why = "is a FIFO (named pipe) that gave no text: nothing was writing to it";
        free(buf);
        return -1;
    }
    /* Some editors start a UTF-8 file with a byte-order mark. It is dropped
     * here, not skipped by the lexer, so that columns count from the first
     * character after it and no diagnostic's source line shows it. */
    static const char bom[] = "\xEF\xBB\xBF";
    const size_t bom_len = sizeof bom - 1;
    if (len >= bom_len && memcmp(buf, bom, bom_len) == 0) {
        len -= bom_len;
        memmove(buf, buf + bom_len, len + 1); /* and the NUL */
    }
    return source_add(t, name, path, buf, len);
}

/* A line ends at "\n", "\r\n" or a lone "\r" (a file saved with classic
 * Mac line endings), as the lexer's comments do. */
static bool ends_line(const source *s, size_t i) {
    return s->text[i] == '\n' || (s->text[i] == '\r' && (i + 1 == s->len || s->text[i + 1] != '\n'));
}

static void build_lines(source *s) {
    size_t n = 1;
    for (size_t i = 0; i < s->len; i++) n += ends_line(s, i);
    s->line_starts = tlm_xmalloc(n * sizeof *s->line_starts);
    size_t k = 0;
    s->line_starts[k++] = 0;
    for (size_t i = 0; i < s->len; i++)
        if (ends_line(s, i)) s->line_starts[k++] = (uint32_t)(i + 1);
    s->nlines = n;
}

void source_position(source *s, uint32_t offset, unsigned *line, unsigned *col) {
    if (!s->line_starts) build_lines(s);
    if (offset > s->len) offset = (uint32_t)s->len;
    size_t lo = 0, hi = s->nlines;               /* last start <= offset */
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (s->line_starts[mid] <= offset) lo = mid;
        else hi = mid;
    }
    *line = (unsigned)lo + 1;
    unsigned c = 1;
    const char *p = s->text + s->line_starts[lo], *end = s->text + offset;
    while (p < end) {
        int32_t cp;
        p += utf8_unit(p, s->text + s->len, &cp);
        c++;
    }
    *col = c;
}

const char *source_line(source *s, unsigned line, size_t *len) {
    if (!s->line_starts) build_lines(s);
    if (line < 1 || line > s->nlines) {
        *len = 0;
        return "";
    }
    uint32_t b = s->line_starts[line - 1];
    uint32_t e = line < s->nlines ? s->line_starts[line] - 1 : (uint32_t)s->len;
    if (e > b && s->text[e - 1] == '\r') e--;
    *len = e - b;
    return s->text + b;
}
