/* llama.cpp's `gpt2` tokenizer splits a text into pre-tokens, maps every
 * byte to GPT-2's byte-to-unicode character and looks the characters up
 * (then merges; there are none here), so with the 256 one-byte tokens in
 * those characters, token i is byte i both ways. llama.cpp reads the
 * merges key even when empty, and always has a BOS and an EOS id: both
 * name byte 0 (NUL, not in texts), and add_bos/add_eos are false so
 * nothing is added to a prompt. */
#include <stdint.h>

#include "llama_map.h"
#include "tok_internal.h"

void tlm_export_byte_vocab(tlm_gguf *g) {
    tlm_strbuf sb = {0};
    size_t at[257], lens[256];
    for (int b = 0; b < 256; b++) {
        at[b] = sb.len;
        uint8_t byte = (uint8_t)b;
        tok_bytelevel_encode(&byte, 1, &sb);
    }
    at[256] = sb.len;
    const char *tokens[256];
    int32_t types[256];
    for (int b = 0; b < 256; b++) {
        tokens[b] = sb.oom ? "" : sb.buf + at[b];
        lens[b] = sb.oom ? 0 : at[b + 1] - at[b];
        types[b] = 1; /* LLAMA_TOKEN_TYPE_NORMAL */
    }
    if (sb.oom) g->oom = true;
    tlm_gguf_set_str(g, "tokenizer.ggml.model", "gpt2");
    tlm_gguf_set_str(g, "tokenizer.ggml.pre", "default");
    tlm_gguf_set_arr_str(g, "tokenizer.ggml.tokens", tokens, lens, 256);
    tlm_gguf_set_arr_i32(g, "tokenizer.ggml.token_type", types, 256);
    tlm_gguf_set_arr_str(g, "tokenizer.ggml.merges", NULL, NULL, 0);
    tlm_gguf_set_u32(g, "tokenizer.ggml.bos_token_id", 0);
    tlm_gguf_set_u32(g, "tokenizer.ggml.eos_token_id", 0);
    tlm_gguf_set_bool(g, "tokenizer.ggml.add_bos_token", false);
    tlm_gguf_set_bool(g, "tokenizer.ggml.add_eos_token", false);
    tlm_sb_free(&sb);
}
