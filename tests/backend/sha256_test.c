/* SHA-256 against the FIPS 180-4 examples (and the NIST CAVS long
 * message), whole and fed in uneven pieces, so the block boundaries and
 * both padding cases are crossed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sha256.h"

static int failures = 0;

static void hex(const uint8_t *d, char out[2 * TLM_SHA256_SIZE + 1]) {
    for (int i = 0; i < TLM_SHA256_SIZE; i++) snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static void expect(const char *what, const uint8_t *digest, const char *want) {
    char got[2 * TLM_SHA256_SIZE + 1];
    hex(digest, got);
    if (strcmp(got, want) != 0) {
        printf("FAIL: %s: %s, wanted %s\n", what, got, want);
        failures++;
    } else {
        printf("ok: %s\n", what);
    }
}

/* The digest of data, whole and in pieces of `piece` bytes. */
static void check(const char *what, const void *data, size_t n, const char *want) {
    uint8_t d[TLM_SHA256_SIZE];
    tlm_sha256(data, n, d);
    expect(what, d, want);
    static const size_t pieces[] = {1, 3, 55, 63, 64, 65};
    for (size_t k = 0; k < sizeof pieces / sizeof *pieces; k++) {
        tlm_sha256_ctx s;
        tlm_sha256_init(&s);
        for (size_t i = 0; i < n; i += pieces[k])
            tlm_sha256_update(&s, (const char *)data + i, n - i < pieces[k] ? n - i : pieces[k]);
        tlm_sha256_final(&s, d);
        char label[160];
        snprintf(label, sizeof label, "%s, in pieces of %zu", what, pieces[k]);
        expect(label, d, want);
    }
}

int main(void) {
    check("empty", "", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    check("abc", "abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"; /* 448 bits: two blocks */
    check("448-bit message", two, strlen(two), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    const char *four = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmno"
                       "ijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
    check("896-bit message", four, strlen(four), "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
    size_t n = 1000000;
    char *a = malloc(n);
    if (!a) return 1;
    memset(a, 'a', n);
    check("a million a's", a, n, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    check("55 a's (padding in one block)", a, 55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
    check("56 a's (padding in two blocks)", a, 56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
    free(a);
    if (failures) {
        printf("sha256_test: %d failure(s)\n", failures);
        return 1;
    }
    printf("sha256_test: all checks passed\n");
    return 0;
}
