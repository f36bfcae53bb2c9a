/* SHA-256 (FIPS 180-4), for the integrity trailer tlmc appends to a
 * model.so and tlm-run checks before loading it (model_so.h). Checked
 * against the standard's test vectors (tests/backend/sha256_test.c). */
#ifndef TLM_SHA256_H
#define TLM_SHA256_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { TLM_SHA256_SIZE = 32 };

typedef struct tlm_sha256_ctx {
    uint32_t state[8];
    uint64_t bytes;                            /* hashed so far */
    uint8_t block[64];                         /* the partial block */
    size_t used;                               /* bytes in block */
} tlm_sha256_ctx;

void tlm_sha256_init(tlm_sha256_ctx *s);
void tlm_sha256_update(tlm_sha256_ctx *s, const void *data, size_t n);
void tlm_sha256_final(tlm_sha256_ctx *s, uint8_t digest[TLM_SHA256_SIZE]);

/* The digest of n bytes in one call. */
void tlm_sha256(const void *data, size_t n, uint8_t digest[TLM_SHA256_SIZE]);

/* The digest of the file at path, read in pieces; false with errno set
 * when it cannot be opened or read. */
bool tlm_sha256_file(const char *path, uint8_t digest[TLM_SHA256_SIZE]);

/* The digest as 64 lowercase hex digits and a NUL: how files and cache
 * names record it. */
void tlm_sha256_hex(const uint8_t digest[TLM_SHA256_SIZE], char hex[2 * TLM_SHA256_SIZE + 1]);

#endif
