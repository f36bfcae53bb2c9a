/* The on-disk module cache: compiled CUDA modules (a CUBIN, or the emulated
 * device's host shared object) kept between runs, so a source is compiled
 * once per compiler and architecture.
 *
 * Folder: $XDG_CACHE_HOME/tlm/kernels (else $HOME/.cache/tlm/kernels),
 * created with mode 0700 when missing.
 *
 * Key: SHA-256 over (source, compiler options, compiler id, arch), each
 * field preceded by its length (LE64), so no two different field lists
 * hash the same bytes ("ab"+"c" is not "a"+"bc").
 *
 * Entry: <key as 64 hex digits>.bin =
 *   "TLMKC001"                 8 bytes, the magic
 *   payload length             LE64
 *   SHA-256 of the payload     32 bytes
 *   payload                    the compiled module
 * An entry is written to a temporary file in the folder, fsync'd and renamed
 * over the name (atomic: a reader sees the old entry, the new one or none).
 * An entry that is damaged (wrong magic, short or long, wrong hash) is
 * removed with a note on stderr and counts as a miss: it is rebuilt, never
 * loaded. Nothing here fails the caller: an unusable cache only means
 * compiling in memory. */
#ifndef TLM_KERNEL_CACHE_H
#define TLM_KERNEL_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "errmsg.h"
#include "sha256.h"

#define TLM_KERNEL_CACHE_MAGIC "TLMKC001"
enum { TLM_KERNEL_CACHE_HEADER = 8 + 8 + TLM_SHA256_SIZE };

void tlm_kernel_cache_key(const char *source, const char *options, const char *compiler_id, const char *arch,
                          uint8_t key[TLM_SHA256_SIZE]);

/* The cache folder, created when missing; false with the reason in why
 * when it cannot be used (no HOME, cannot be created, not a directory, not
 * writable). */
bool tlm_kernel_cache_dir(char *dir, size_t size, tlm_err *why);

/* DIR/<64 hex>.bin; false when it does not fit in size. */
bool tlm_kernel_cache_path(const char *dir, const uint8_t key[TLM_SHA256_SIZE], char *path, size_t size);

/* The entry's payload (malloc'd) when path holds a sound entry; false on a
 * miss: absent, unreadable, or damaged (then removed, with a note on
 * stderr; a file, link or FIFO in an entry's place too). */
bool tlm_kernel_cache_get(const char *path, uint8_t **payload, size_t *size);

/* Whether a folder or a device holds the entry's name: nothing the cache
 * removes, so nothing to store there (the get's note said so). */
bool tlm_kernel_cache_blocked(const char *path);

/* What tlm_kernel_cache_get would find at path, changing nothing: 1 a
 * sound entry, 0 none, -1 a damaged or unreadable one (the reason in why).
 * For `tlm-run info`, which reports; the run that compiles repairs. */
int tlm_kernel_cache_probe(const char *path, char *why, size_t len);

/* Stores payload under path atomically; false with the reason in err. */
bool tlm_kernel_cache_put(const char *path, const uint8_t *payload, size_t size, tlm_err *err);

#endif
