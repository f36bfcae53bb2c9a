/* The `tokenizer` setting's reader: the runtime's tokenizer library
 * (runtime/tokenizer/) behind the program's tokenizer_loader, so that the
 * checker itself does not depend on the runtime. This folder is the one
 * place where the compiler sees a runtime header (tests/layout's rule says
 * so); it is built into tlmc only when the runtime is (TLM_HAVE_TOKENIZER). */
#ifndef TLM_TOKENIZER_READER_H
#define TLM_TOKENIZER_READER_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

bool tokenizer_reader_load(const char *path, int64_t *vocab, uint8_t hash[32], char *why, size_t whylen);

#endif
