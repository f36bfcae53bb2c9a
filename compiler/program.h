/* A program: the main .tlm file and every module it uses, parsed, with the
 * global tables of schedules, params and models. Modules are found on a
 * search path, loaded once each, and cycles between them are errors. */
#ifndef TLM_PROGRAM_H
#define TLM_PROGRAM_H

#include <stddef.h>
#include <stdint.h>

#include "ast.h"
#include "session.h"
#include "symtab.h"

typedef struct loaded_file {
    char *realpath;          /* identity of the file */
    int file;                /* source index */
    bool loading;            /* on the stack of `use`s being followed */
    item *items;
    const item **trains;     /* its top-level train blocks, in order (the session's arena) */
    int ntrains;
} loaded_file;

/* Reads the tokenizer at path for the `tokenizer` setting: its vocabulary
 * size and identity hash; false with a reason in why. tlmc sets it when it
 * is built with the runtime's tokenizer library (compiler/tokenizer/). */
typedef bool (*tokenizer_loader)(const char *path, int64_t *vocab, uint8_t hash[32], char *why, size_t whylen);

typedef struct program {
    tlm_session *s;
    int main_file;
    const char *const *include_dirs;
    int ninclude;
    const char *stdlib_dir;

    loaded_file *files;      /* in load order: a module before its user */
    int nfiles, capfiles;

    symtab schedules, params, models, studies;  /* name -> item* */
    symtab param_overrides;            /* name -> expr* from -D (and a study's grid point) */
    const item *study_train;           /* a study's train block: applied after the model's own */
    tokenizer_loader load_tokenizer;   /* NULL: this build cannot read tokenizers */

    int64_t eval_steps;                /* expression nodes evaluated so far */
    int64_t max_eval_steps;            /* then evaluation stops with an error */
} program;

enum { TLM_DEFAULT_EVAL_STEPS = 50 * 1000 * 1000 };

/* Loads and parses path and its modules and builds the tables. Returns false
 * if the main file cannot be read (reported); syntax and name errors are
 * reported through the session and counted there. */
bool program_load(program *p, tlm_session *s, const char *path, const char *const *include_dirs, int ninclude,
                  const char *stdlib_dir);
/* Also loads from memory (the fuzzer); name is what diagnostics show. */
bool program_load_text(program *p, tlm_session *s, const char *name, const char *text, size_t len,
                       const char *stdlib_dir);
void program_free(program *p);

/* The folder of a loaded source file (absolute, in the session arena):
 * paths written in it are relative to it. */
const char *program_file_dir(const program *p, int file);

/* The items of the main file. */
item *program_main_items(const program *p);

#endif
