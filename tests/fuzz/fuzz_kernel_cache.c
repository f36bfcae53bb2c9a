/* libFuzzer target over the kernel cache's entry reader
 * (runtime/device/kernel_cache.c): the bytes are a cache entry on disk.
 * A sound entry must give back exactly its payload, whose hash the header
 * holds; anything else must be a miss that removes the file, never a
 * crash or a payload of the wrong size. The reader's notes on damaged
 * entries go to stderr, silenced here (TLM_FUZZ_VERBOSE=1 keeps them, and
 * the sanitizers' reports, when replaying a finding).
 * TLM_FUZZ_WRITE_SEEDS=DIR writes the seeds (corpus-kernel_cache/). */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernel_cache.h"
#include "le64.h"
#include "sha256.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static char dir[4096], file[4200];
static int quiet_fd = -1, stderr_copy = -1;

static void cleanup(void) {
    unlink(file);
    rmdir(dir);
}

/* The seeds: a sound entry, and the same with a flipped payload byte. */
static void write_seeds(const char *out) {
    const uint8_t payload[] = "\x7f"
                              "ELF a compiled module";
    char path[4300];
    tlm_err err;
    snprintf(path, sizeof path, "%s/sound", out);
    if (!tlm_kernel_cache_put(path, payload, sizeof payload, &err)) abort();
    snprintf(path, sizeof path, "%s/flipped", out);
    if (!tlm_kernel_cache_put(path, payload, sizeof payload, &err)) abort();
    FILE *f = fopen(path, "r+b");
    if (!f || fseek(f, TLM_KERNEL_CACHE_HEADER + 3, SEEK_SET) != 0 || fputc('!', f) == EOF || fclose(f) != 0) abort();
    exit(0);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    if (getenv("TLM_FUZZ_WRITE_SEEDS")) write_seeds(getenv("TLM_FUZZ_WRITE_SEEDS"));
    const char *tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(dir, sizeof dir, "%s/fuzz_kernel_cache.%ld", tmp, (long)getpid());
    snprintf(file, sizeof file, "%s/entry.bin", dir);
    if (mkdir(dir, 0700) != 0) abort();
    atexit(cleanup);
    if (!getenv("TLM_FUZZ_VERBOSE")) {
        quiet_fd = open("/dev/null", O_WRONLY);
        stderr_copy = dup(2);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    FILE *fp = fopen(file, "wb");
    if (!fp || fwrite(data, 1, size, fp) != size || fclose(fp) != 0) abort();
    uint8_t *payload = NULL;
    size_t got = 0;
    if (quiet_fd >= 0) dup2(quiet_fd, 2);
    bool hit = tlm_kernel_cache_get(file, &payload, &got);
    if (stderr_copy >= 0) dup2(stderr_copy, 2);
    if (hit) {
        /* sound: the header's length is the payload's, and the file is whole */
        if (size < TLM_KERNEL_CACHE_HEADER || memcmp(data, TLM_KERNEL_CACHE_MAGIC, 8) != 0) abort();
        if (tlm_get_le64(data + 8) != got || size != TLM_KERNEL_CACHE_HEADER + got) abort();
        if (got && memcmp(payload, data + TLM_KERNEL_CACHE_HEADER, got) != 0) abort();
        uint8_t digest[TLM_SHA256_SIZE];
        tlm_sha256(payload, got, digest);
        if (memcmp(digest, data + 16, sizeof digest) != 0) abort();
    } else if (access(file, F_OK) == 0) {
        abort(); /* a damaged entry (a regular file) is removed */
    }
    free(payload);
    return 0;
}
