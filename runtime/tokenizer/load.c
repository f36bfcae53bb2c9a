/* tlm_tok_load: which reader a path goes to (tokenizer.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "regular_file.h"
#include "tok_internal.h"
#include "tlm_rt/json.h"

tlm_tokenizer *tlm_tok_load(const char *path, tlm_err *err) {
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        char enc_path[4200], bpe_path[4200];
        snprintf(enc_path, sizeof enc_path, "%s/encoder.json", path);
        snprintf(bpe_path, sizeof bpe_path, "%s/vocab.bpe", path);
        /* a folder is read as GPT-2's pair; one that holds neither file
         * was most likely meant as something else, so say what a folder is */
        struct stat f;
        if (stat(enc_path, &f) != 0 && stat(bpe_path, &f) != 0 && errno == ENOENT)
            return tlm_fail(err,
                            "%s is a folder without GPT-2's encoder.json and vocab.bpe (give a tokenizer.json, "
                            "a tiktoken rank file, or a folder holding those two)",
                            path),
                   NULL;
        size_t enc_n, bpe_n;
        uint8_t *enc = tlm_read_regular(enc_path, TLM_TOK_MAX_FILE, "a vocabulary", &enc_n, err);
        if (!enc) return NULL;
        uint8_t *bpe = tlm_read_regular(bpe_path, TLM_TOK_MAX_FILE, "a merges file", &bpe_n, err);
        if (!bpe) {
            free(enc);
            return NULL;
        }
        tlm_tokenizer *t = tlm_tok_parse_gpt2((const char *)enc, enc_n, (const char *)bpe, bpe_n, path, err);
        free(enc);
        free(bpe);
        return t;
    }
    size_t n;
    uint8_t *text = tlm_read_regular(path, TLM_TOK_MAX_FILE, "a tokenizer", &n, err);
    if (!text) return NULL;
    /* a tokenizer.json saved with a byte order mark (some editors on
     * Windows write one) is read as the JSON it is (RFC 8259 lets a parser
     * ignore it); a rank file has none to skip */
    size_t bom = tlm_utf8_bom_bytes(text, n), i = bom;
    while (i < n && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r')) i++;
    if (i == n) {
        free(text);
        return tlm_fail(err, "%s is empty%s (expected a tokenizer.json or a tiktoken rank file)", path,
                        n > bom ? " but for white space"
                        : bom   ? " but for a byte order mark"
                                : ""),
               NULL;
    }
    tlm_tokenizer *t = i < n && text[i] == '{' ? tlm_tok_parse_hf((const char *)text + bom, n - bom, path, err)
                                               : tlm_tok_parse_tiktoken((const char *)text, n, path, err);
    free(text);
    return t;
}
