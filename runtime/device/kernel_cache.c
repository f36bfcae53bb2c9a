#include "kernel_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic_file.h"
#include "le64.h"
#include "regular_file.h"

/* A cache entry larger than this is not one we wrote (the runtime's CUBIN
 * is a few MiB): refused unread. */
#define MAX_ENTRY_BYTES ((uint64_t)1 << 30)

static void hash_field(tlm_sha256_ctx *s, const char *field) {
    uint8_t len[8];
    size_t n = strlen(field);
    tlm_put_le64(len, n);
    tlm_sha256_update(s, len, sizeof len);
    tlm_sha256_update(s, field, n);
}

void tlm_kernel_cache_key(const char *source, const char *options, const char *compiler_id, const char *arch,
                          uint8_t key[TLM_SHA256_SIZE]) {
    tlm_sha256_ctx s;
    tlm_sha256_init(&s);
    hash_field(&s, source);
    hash_field(&s, options);
    hash_field(&s, compiler_id);
    hash_field(&s, arch);
    tlm_sha256_final(&s, key);
}

/* mkdir -p with mode 0700 for the parts that are missing. */
static bool make_folders(char *path, tlm_err *why) {
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0') continue;
        char saved = *p;
        *p = '\0';
        bool made = mkdir(path, 0700) == 0 || errno == EEXIST;
        int e = errno;
        if (!made) {
            tlm_fail(why, "cannot create %s: %s", path, strerror(e));
            *p = saved;
            return false;
        }
        *p = saved;
        if (saved == '\0') return true;
    }
}

bool tlm_kernel_cache_dir(char *dir, size_t size, tlm_err *why) {
    /* The XDG base directory rules: an empty or relative XDG_CACHE_HOME is
     * ignored. */
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int n;
    if (xdg && xdg[0] == '/') n = snprintf(dir, size, "%s/tlm/kernels", xdg);
    else if (home && home[0] == '/') n = snprintf(dir, size, "%s/.cache/tlm/kernels", home);
    else {
        snprintf(dir, size, "%s", "");
        return tlm_fail(why, "neither XDG_CACHE_HOME nor HOME names an absolute folder");
    }
    if (n < 0 || (size_t)n >= size) return tlm_fail(why, "the path is too long");
    if (!make_folders(dir, why)) return false;
    struct stat st;
    if (stat(dir, &st) != 0) return tlm_fail(why, "%s", strerror(errno));
    if (!S_ISDIR(st.st_mode)) return tlm_fail(why, "it is %s, not a directory", tlm_file_kind(st.st_mode));
    if (access(dir, W_OK | X_OK) != 0) return tlm_fail(why, "not writable: %s", strerror(errno));
    return true;
}

bool tlm_kernel_cache_path(const char *dir, const uint8_t key[TLM_SHA256_SIZE], char *path, size_t size) {
    char hex[2 * TLM_SHA256_SIZE + 1];
    tlm_sha256_hex(key, hex);
    int n = snprintf(path, size, "%s/%s.bin", dir, hex);
    return n >= 0 && (size_t)n < size;
}

/* The payload's place in a whole entry, or NULL with the reason. */
static const char *entry_problem(const uint8_t *bytes, size_t size) {
    if (size < TLM_KERNEL_CACHE_HEADER) return "shorter than its header";
    if (memcmp(bytes, TLM_KERNEL_CACHE_MAGIC, 8) != 0) return "not a kernel cache entry (wrong magic)";
    uint64_t recorded = tlm_get_le64(bytes + 8);
    if (recorded > size - TLM_KERNEL_CACHE_HEADER) return "truncated";
    if (recorded < size - TLM_KERNEL_CACHE_HEADER) return "longer than it says";
    uint8_t digest[TLM_SHA256_SIZE];
    tlm_sha256(bytes + TLM_KERNEL_CACHE_HEADER, (size_t)recorded, digest);
    if (memcmp(digest, bytes + 16, sizeof digest) != 0) return "its SHA-256 does not match";
    return NULL;
}

/* The whole entry at path (malloc'd, n bytes) when it is sound; NULL with
 * *problem set when it is damaged or unreadable, or unset when absent. */
static uint8_t *read_entry(const char *path, size_t *n, tlm_err *err, const char **problem) {
    *problem = NULL;
    *n = 0;
    struct stat st;
    if (lstat(path, &st) != 0) return NULL; /* not cached yet */
    uint8_t *bytes = tlm_read_regular(path, MAX_ENTRY_BYTES, "a kernel cache entry", n, err);
    *problem = bytes ? entry_problem(bytes, *n) : err->msg;
    if (!*problem) return bytes;
    free(bytes);
    return NULL;
}

bool tlm_kernel_cache_blocked(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0 && (S_ISDIR(st.st_mode) || S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode));
}

int tlm_kernel_cache_probe(const char *path, char *why, size_t len) {
    tlm_err err = {{0}};
    size_t n;
    const char *problem;
    uint8_t *bytes = read_entry(path, &n, &err, &problem);
    free(bytes);
    if (problem && len) snprintf(why, len, "%s", problem);
    return bytes ? 1 : problem ? -1 : 0;
}

bool tlm_kernel_cache_get(const char *path, uint8_t **payload, size_t *size) {
    *payload = NULL;
    *size = 0;
    tlm_err err = {{0}};
    size_t n = 0;
    const char *problem;
    uint8_t *bytes = read_entry(path, &n, &err, &problem);
    if (problem) {
        /* A file, a link or a FIFO under an entry's name is only a name in
         * the cache's folder: removed, the compiled module takes its place
         * (left there, every run would say so again and compile again). A
         * folder (or a device) is not ours to empty: left alone, and not
         * written over (tlm_kernel_cache_blocked). */
        bool blocked = tlm_kernel_cache_blocked(path), removed = !blocked && unlink(path) == 0;
        fprintf(stderr, "tlm: note: kernel cache entry %s is unusable (%s); %s\n", path, problem,
                removed   ? "removed, compiling again"
                : blocked ? "left alone, compiling in memory until it is removed"
                          : "compiling again");
        return false;
    }
    if (!bytes) return false; /* not cached yet */
    *size = n - TLM_KERNEL_CACHE_HEADER;
    memmove(bytes, bytes + TLM_KERNEL_CACHE_HEADER, *size);
    *payload = bytes;
    return true;
}

/* Written like every other output (atomic_file.h): a reader, another run
 * of the same model, sees the old entry or the new one, never part of
 * one. */
bool tlm_kernel_cache_put(const char *path, const uint8_t *payload, size_t size, tlm_err *err) {
    uint8_t header[TLM_KERNEL_CACHE_HEADER];
    memcpy(header, TLM_KERNEL_CACHE_MAGIC, 8);
    tlm_put_le64(header + 8, size);
    tlm_sha256(payload, size, header + 16);
    tlm_atomic_file f;
    if (!tlm_atomic_open(&f, path, err)) return false;
    if (!tlm_write_all(f.fd, header, sizeof header) || !tlm_write_all(f.fd, payload, size)) {
        int e = errno;
        tlm_atomic_abort(&f);
        return tlm_fail(err, "cannot write %s: %s", path, strerror(e));
    }
    return tlm_atomic_commit(&f, err);
}
