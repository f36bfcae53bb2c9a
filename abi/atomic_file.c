#include "atomic_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "regular_file.h"
#include "remove_on_signal.h"

/* A temporary is TARGET.tmp.XXXXXX (mkstemp's six letters or digits):
 * tlm_remove_stale_temps recognises what a kill left of one by that name. */
#define TMP_INFIX ".tmp."
#define TMP_RANDOM 6
#define TMP_SUFFIX TMP_INFIX "XXXXXX"

static void folder_of(const char *path, char *dir, size_t n) {
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, n, ".");
    else if (slash == path) snprintf(dir, n, "/");
    else snprintf(dir, n, "%.*s", (int)(slash - path), path);
}

bool tlm_sync_dir_of(const char *path) {
    char dir[4096];
    folder_of(path, dir, sizeof dir);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return false;
    bool ok = fsync(fd) == 0;
    close(fd);
    return ok;
}

/* f->target: path, or the file a symbolic link at path names; refused when
 * it exists and is not a regular file. *mode: the mode to give the new file
 * (the old one's, or a plain create's). */
static bool pick_target(tlm_atomic_file *f, const char *path, mode_t *mode, tlm_err *err) {
    if (!*path) return tlm_fail(err, "an empty output path");
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno != ENOENT) return tlm_fail(err, "%s: %s", path, strerror(errno));
        if ((size_t)snprintf(f->target, sizeof f->target, "%s", path) >= sizeof f->target)
            return tlm_fail(err, "%s: the path is too long", path);
        mode_t mask = umask(0);
        umask(mask);
        *mode = 0666 & ~mask;
        return true;
    }
    const char *named = path; /* what the messages below name */
    if (S_ISLNK(st.st_mode)) {
        if (!realpath(path, f->target) || stat(f->target, &st) != 0) {
          /* /dev/stdout on a pipe: a link to "pipe:[N]", no path, but a FIFO */
            if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
                return tlm_fail(err,
                                "%s is %s, not a regular file: an output is written beside its target and renamed "
                                "over it",
                                path, tlm_file_kind(st.st_mode));
            return tlm_fail(err, "%s is a symbolic link to a file that does not exist; name the file itself", path);
        }
        named = f->target;
    } else if ((size_t)snprintf(f->target, sizeof f->target, "%s", path) >= sizeof f->target) {
        return tlm_fail(err, "%s: the path is too long", path);
    }
    if (S_ISDIR(st.st_mode)) return tlm_fail(err, "%s is a folder: name the file to write", named);
    if (!S_ISREG(st.st_mode))
        return tlm_fail(err,
                        "%s is %s, not a regular file: an output is written beside its target and renamed over it, "
                        "which would replace it",
                        named, tlm_file_kind(st.st_mode));
    const char *stream = tlm_std_stream_file(&st);
    if (stream)
        return tlm_fail(err,
                        "%s is the file standard %s goes to: an output is written beside it and renamed over it, which "
                        "would replace that file; give the output a path of its own",
                        path, stream);
    *mode = st.st_mode & 07777;
    return true;
}

/* Creates tmp, a name ending in TMP_RANDOM X's, with those drawn at random
 * (mkostemp's letters and digits), registered for removal on an interrupt
 * before the file exists: created first, as mkostemp does, a SIGINT between
 * the creation and the registration left the temporary behind. -1 with
 * errno when it cannot be created. */
static int create_registered(char *tmp) {
    static const char digits[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    char *x = tmp + strlen(tmp) - TMP_RANDOM;
    for (int attempt = 0; attempt < 100; attempt++) {
        unsigned char r[TMP_RANDOM]; /* getrandom waits only until the pool first has entropy, at boot */
        if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) return -1;
        for (int i = 0; i < TMP_RANDOM; i++) x[i] = digits[r[i] % 62];
        bool registered = tlm_remove_on_signal(tmp);
        int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd >= 0) return fd;
        int e = errno;
        if (registered) tlm_keep_on_signal(tmp);
        errno = e;
        if (e != EEXIST) return -1;
    }
    return -1; /* errno EEXIST: a hundred names taken */
}

bool tlm_atomic_target_ok(const char *path, tlm_err *err) {
    tlm_atomic_file f;
    mode_t mode;
    return pick_target(&f, path, &mode, err);
}

bool tlm_atomic_open(tlm_atomic_file *f, const char *path, tlm_err *err) {
    return tlm_atomic_open_spare(f, path, 0, err);
}

bool tlm_atomic_open_spare(tlm_atomic_file *f, const char *path, size_t spare, tlm_err *err) {
    memset(f, 0, sizeof *f);
    f->fd = -1;
    mode_t mode = 0;
    if (!pick_target(f, path, &mode, err)) return false;
    /* PATH.tmp.XXXXXX; where that name is longer than a name may be, a
     * shorter one in the same folder (the rename must stay within it) */
    const char *base = strrchr(f->target, '/');
    base = base ? base + 1 : f->target;
    if (strlen(base) + strlen(TMP_SUFFIX) + spare <= NAME_MAX)
        snprintf(f->tmp, sizeof f->tmp, "%s" TMP_SUFFIX, f->target);
    else {
        char dir[4096];
        folder_of(f->target, dir, sizeof dir);
        snprintf(f->tmp, sizeof f->tmp, "%s/.tlm" TMP_SUFFIX, dir);
    }
    f->fd = create_registered(f->tmp);
    if (f->fd < 0) {
        int e = errno;
        f->tmp[0] = '\0'; /* nothing to remove */
        char dir[4096];
        folder_of(f->target, dir, sizeof dir);
        struct stat st;
        if (e == ENOENT || e == ENOTDIR) {
            if (stat(dir, &st) != 0) return tlm_fail(err, "%s: the folder %s does not exist", path, dir);
            if (!S_ISDIR(st.st_mode)) return tlm_fail(err, "%s: %s is not a folder", path, dir);
        }
        return tlm_fail(err, "%s: cannot create a temporary file in %s: %s", path, dir, strerror(e));
    }
    if (fchmod(f->fd, mode) != 0) {
        int e = errno;
        tlm_atomic_abort(f);
        return tlm_fail(err, "%s: cannot set the mode of its temporary file: %s", path, strerror(e));
    }
    return true;
}

void tlm_atomic_abort(tlm_atomic_file *f) {
    if (f->fd >= 0) close(f->fd);
    f->fd = -1;
    if (f->tmp[0]) {
        unlink(f->tmp);
        tlm_keep_on_signal(f->tmp);
        f->tmp[0] = '\0';
    }
}

/* fsync, rename, fsync the folder; the descriptor closed first unless the
 * caller keeps it */
static bool finish(tlm_atomic_file *f, bool keep_open, tlm_err *err) {
    int e = 0;
    if (fsync(f->fd) != 0) e = errno;
    if (!keep_open) {
        if (close(f->fd) != 0 && !e) e = errno;
        f->fd = -1;
    }
    if (e) {
        tlm_atomic_abort(f);
        return tlm_fail(err, "%s: cannot write: %s", f->target, strerror(e));
    }
    if (rename(f->tmp, f->target) != 0) {
        e = errno;
        tlm_atomic_abort(f);
        return tlm_fail(err, "%s: cannot rename into place: %s", f->target, strerror(e));
    }
    tlm_keep_on_signal(f->tmp);
    f->tmp[0] = '\0';
    tlm_sync_dir_of(f->target);
    return true;
}

bool tlm_atomic_commit(tlm_atomic_file *f, tlm_err *err) { return finish(f, false, err); }

bool tlm_atomic_publish(tlm_atomic_file *f, tlm_err *err) { return finish(f, true, err); }

bool tlm_write_all(int fd, const void *bytes, size_t n) {
    const char *p = bytes;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (w == 0) errno = ENOSPC;
            return false;
        }
        p += w, n -= (size_t)w;
    }
    return true;
}

bool tlm_write_file_atomic(const char *path, const void *bytes, size_t n, tlm_err *err) {
    tlm_atomic_file f;
    if (!tlm_atomic_open(&f, path, err)) return false;
    if (!tlm_write_all(f.fd, bytes, n)) {
        int e = errno;
        tlm_atomic_abort(&f);
        return tlm_fail(err, "%s: cannot write: %s", path, strerror(e));
    }
    return tlm_atomic_commit(&f, err);
}

/* Where path would be created: the real path of its nearest folder that
 * exists, then the rest of it as written (the folders a run makes before
 * writing there, as a checkpoint's); false when no folder resolves, the
 * rest holds "." or "..", or it is too long. */
static bool future_path(const char *path, char out[PATH_MAX + NAME_MAX + 2]) {
    char dir[PATH_MAX];
    if ((size_t)snprintf(dir, sizeof dir, "%s", path) >= sizeof dir) return false;
    const char *rest = path + strlen(path); /* what is past dir in path */
    char real[PATH_MAX];
    for (;;) {
        char *slash = strrchr(dir, '/');
        const char *name = slash ? slash + 1 : dir;
        if (!*name || !strcmp(name, ".") || !strcmp(name, "..") || strlen(name) > NAME_MAX) return false;
        rest -= strlen(name) + (slash ? 1 : 0);
        if (!slash) snprintf(dir, sizeof dir, ".");
        else if (slash == dir) snprintf(dir, sizeof dir, "/");
        else *slash = '\0';
        if (realpath(dir, real)) break;
        if (errno != ENOENT || !strcmp(dir, ".") || !strcmp(dir, "/")) return false;
    }
    if (*rest == '/') rest++;
    return (size_t)snprintf(out, PATH_MAX + NAME_MAX + 2, "%s/%s", strcmp(real, "/") ? real : "", rest) <
           PATH_MAX + NAME_MAX + 2;
}

bool tlm_same_file(const char *a, const char *b) {
    struct stat sa, sb;
    bool has_a = stat(a, &sa) == 0, has_b = stat(b, &sb) == 0;
    if (has_a && has_b) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    if (has_a || has_b) return false;
    /* neither exists yet: one file if they name one place (a log named as
     * the checkpoint that the run is about to write first) */
    char pa[PATH_MAX + NAME_MAX + 2], pb[PATH_MAX + NAME_MAX + 2];
    return future_path(a, pa) && future_path(b, pb) && !strcmp(pa, pb);
}

bool tlm_output_not_input(const char *out, const char *in, const char *what, tlm_err *err) {
    if (!in || !tlm_same_file(out, in)) return true;
    return tlm_fail(err, "%s is also %s (%s): writing it would destroy it; name another output", out, what, in);
}

/* "XXXXXX" of mkstemp: letters and digits. */
static bool random_part(const char *s) {
    for (int i = 0; i < TMP_RANDOM; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9')))
            return false;
    return true;
}

/* BASE.tmp.XXXXXX, or BASE.tmp.XXXXXX.tmp.YYYYYY (what an earlier tlm-run,
 * whose checkpoint went through tlm_st_write's own temporary inside its
 * own, could leave). */
static bool stale_name(const char *name, const char *base) {
    size_t b = strlen(base), k = strlen(TMP_INFIX);
    if (strncmp(name, base, b) != 0 || strncmp(name + b, TMP_INFIX, k) != 0) return false;
    const char *p = name + b + k;
    if (!random_part(p)) return false;
    p += TMP_RANDOM;
    if (!*p) return true;
    return strncmp(p, TMP_INFIX, k) == 0 && random_part(p + k) && !p[k + TMP_RANDOM];
}

int tlm_remove_stale_temps(const char *path, tlm_err *err) {
    char dir[4096];
    folder_of(path, dir, sizeof dir);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT) return 0;
        tlm_fail(err, "%s: cannot list the folder: %s", dir, strerror(errno));
        return -1;
    }
    int removed = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        struct stat st;
        if (!stale_name(e->d_name, base)) continue;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
        if (unlinkat(dirfd(d), e->d_name, 0) != 0) {
            tlm_fail(err, "%s/%s: cannot remove this stale temporary file: %s", dir, e->d_name, strerror(errno));
            removed = -1;
            break;
        }
        removed++;
    }
    closedir(d);
    return removed;
}
