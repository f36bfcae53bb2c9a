/* GPT-2's bytes_to_unicode: the printable bytes ! .. ~, ¡ .. ¬ and ® .. ÿ
 * stand for themselves; the other 68 bytes, in order, for U+0100 + k. Files
 * of byte-level BPE vocabularies (encoder.json, vocab.bpe, tokenizer.json)
 * write tokens in these characters. */
#include <pthread.h>

#include "tok_internal.h"
#include "unicode.h"

static int byte_of_cp[0x100 + 68]; /* -1: stands for no byte */
static uint16_t cp_of_byte[256];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void build_tables(void) {
    for (int cp = 0; cp < 0x100 + 68; cp++) byte_of_cp[cp] = -1;
    int k = 0;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        cp_of_byte[b] = (uint16_t)(printable ? b : 0x100 + k++);
        byte_of_cp[cp_of_byte[b]] = b;
    }
}

long tok_bytelevel_decode(const char *s, size_t n, uint8_t *out) {
    pthread_once(&tables_once, build_tables);
    const uint8_t *p = (const uint8_t *)s;
    long m = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        i += (size_t)tok_utf8_next(p + i, n - i, &cp);
        if (cp >= 0x100 + 68 || byte_of_cp[cp] < 0) return -1;
        out[m++] = (uint8_t)byte_of_cp[cp];
    }
    return m;
}

void tok_bytelevel_encode(const uint8_t *b, size_t n, tlm_strbuf *out) {
    pthread_once(&tables_once, build_tables);
    for (size_t i = 0; i < n; i++) {
        unsigned cp = cp_of_byte[b[i]];
        char u[2] = {(char)(0xC0 | cp >> 6), (char)(0x80 | (cp & 0x3F))};
        if (cp < 0x80) tlm_sb_append(out, (const char *)&b[i], 1);
        else tlm_sb_append(out, u, 2);
    }
}
