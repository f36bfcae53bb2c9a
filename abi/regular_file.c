#include "regular_file.h"

#include <errno.h>
#include <stdlib.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *tlm_file_kind(unsigned mode) {
    switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFIFO: return "a FIFO (named pipe)";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFSOCK: return "a socket";
    case S_IFLNK: return "a symbolic link";
    default: return "not a regular file";
    }
}

static bool refuse_special(const char *path, const struct stat *st, tlm_err *err) {
    return tlm_fail(err, "%s is %s, not a regular file", path, tlm_file_kind(st->st_mode));
}

int tlm_open_regular(const char *path, tlm_err *err) {
    struct stat st;
    if (stat(path, &st) != 0) {
        tlm_fail(err, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        refuse_special(path, &st, err);
        return -1;
    }
    /* O_NONBLOCK: if a FIFO replaced the file since stat, open returns at
     * once instead of waiting for a writer; fstat then refuses it. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        tlm_fail(err, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        refuse_special(path, &st, err);
        close(fd);
        return -1;
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0) (void)fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    return fd;
}

uint8_t *tlm_read_regular(const char *path, uint64_t max_bytes, const char *what, size_t *size, tlm_err *err) {
    int fd = tlm_open_regular(path, err);
    if (fd < 0) return NULL;
    uint8_t *bytes = tlm_read_regular_fd(fd, path, max_bytes, what, size, err);
    close(fd);
    return bytes;
}

uint8_t *tlm_read_regular_fd(int fd, const char *path, uint64_t max_bytes, const char *what, size_t *size,
                             tlm_err *err) {
    struct stat st;
    uint8_t *bytes = NULL;
    if (fstat(fd, &st) != 0) {
        tlm_fail(err, "cannot read %s: %s", path, strerror(errno));
    } else if ((uint64_t)st.st_size > max_bytes) {
        tlm_fail(err, "%s is %llu bytes, too large to be %s", path, (unsigned long long)st.st_size, what);
    } else if (!(bytes = malloc(st.st_size ? (size_t)st.st_size : 1))) {
        tlm_fail(err, "out of memory reading %s (%llu bytes)", path, (unsigned long long)st.st_size);
    } else {
        size_t n = (size_t)st.st_size, got = 0;
        int error = 0;
        while (got < n) {
            ssize_t r = pread(fd, bytes + got, n - got, (off_t)got);
            if (r < 0 && errno == EINTR) continue;
            if (r < 0) error = errno;
            if (r <= 0) break;
            got += (size_t)r;
        }
        if (got != n) {
            tlm_fail(err, "cannot read %s: %s", path, error ? strerror(error) : "it shrank while being read");
            free(bytes);
            bytes = NULL;
        }
        *size = n;
    }
    return bytes;
}

FILE *tlm_fopen_regular(const char *path, tlm_err *err) {
    int fd = tlm_open_regular(path, err);
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        tlm_fail(err, "cannot open %s: %s", path, strerror(errno));
        close(fd);
    }
    return f;
}

const char *tlm_std_stream_file(const struct stat *st) {
    static const struct {
        int fd;
        const char *name;
    } streams[] = {{STDOUT_FILENO, "output"}, {STDERR_FILENO, "error"}};
    for (int i = 0; i < 2; i++) {
        struct stat o;
        if (fstat(streams[i].fd, &o) == 0 && o.st_dev == st->st_dev && o.st_ino == st->st_ino) return streams[i].name;
    }
    return NULL;
}
