/* The model.so descriptor: its writer (model_so_write.c), its reader and
 * validator (model_so.c) and its printer (model_so_print.c), side by side
 * over one struct of tables, so what tlmc writes and what tlm-run reads
 * mirror each other (the record layouts and constants: tlm_abi.h).
 *
 * Reading checks the whole file before dlopen (so a damaged, truncated or
 * foreign file is an error, not a crash: see the integrity trailer below),
 * resolves the ABI's symbols, and validates every count, offset and index
 * of the descriptor against its size and checksum, and every index the
 * executor later follows. After tlm_so_open (or tlm_blob_read) succeeds,
 * the tables can be read without further checks. */
#ifndef TLM_MODEL_SO_H
#define TLM_MODEL_SO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include "errmsg.h"
#include "tlm_abi.h"

/* The descriptor's tables: what tlm_blob_write consumes and what the reader
 * exposes. In the blob, names are offsets into its string table (the
 * records' name and symbol fields, and plans' offsets_off, are the writer's
 * to fill in: it ignores what they hold); here they are C strings, and each
 * plan's per-buffer offsets are an array (bytes; -1: not in that plan).
 * plans and plan_offsets are indexed by tlm_abi_plan_kind; param_names,
 * kernel_symbols (and kernel_impl_whys, the kernels' other string) and
 * buffer_names have nparams, nkernels and nbuffers entries. The fields are a macro so that tlm_so can hold them both as one
 * struct (so->tables, for the printer) and directly (so->params), the
 * spelling the runtime uses. */
#define TLM_SO_TABLES_FIELDS                             \
    const tlm_abi_config *config;                        \
    const tlm_abi_train *train;                          \
    const tlm_abi_layer *layers;                         \
    const tlm_abi_param *params;                         \
    const tlm_abi_kernel *kernels;                       \
    const tlm_abi_buffer *buffers;                       \
    const tlm_abi_op *ops;                               \
    const tlm_abi_plan *plans;                           \
    uint32_t nlayers, nparams, nkernels, nbuffers, nops; \
    const int64_t *plan_offsets[TLM_PLAN_COUNT];         \
    const char *model_name;                              \
    const char *tokenizer_path; /* NULL: none */         \
    const char *cpu_needs; /* NULL: not recorded */      \
    const char *const *param_names;                      \
    const char *const *kernel_symbols;                   \
    const char *const *kernel_impl_whys;                 \
    const char *const *buffer_names;

typedef struct tlm_so_tables {
    TLM_SO_TABLES_FIELDS
} tlm_so_tables;

/* ---- writing (tlmc) ---- */

/* The descriptor blob for t: malloc'd, *size gets its length. NULL when out
 * of memory. */
uint8_t *tlm_blob_write(const tlm_so_tables *t, size_t *size);

/* ---- reading (tlm-run, and tlmc --emit-ir on the blob it just wrote) ---- */

/* Checks a descriptor blob in memory: the format, and everything the
 * executor indexes. Returns false with a one-line reason in err. */
bool tlm_blob_validate(const uint8_t *blob, size_t size, tlm_err *err);

/* Validates the blob and views it as tables (pointing into the blob, which
 * must outlive them). Free with tlm_so_tables_free. */
bool tlm_blob_read(const uint8_t *blob, size_t size, tlm_so_tables *t, tlm_err *err);
void tlm_so_tables_free(tlm_so_tables *t);

typedef struct tlm_so {
    void *handle;
    const tlm_blob_header *header;
    union {
        tlm_so_tables tables;
        struct {
            TLM_SO_TABLES_FIELDS
        };
    };
    const char *strings;
    const tlm_kernel_fns *kernel_fns;
    const char *cuda_source;
} tlm_so;

/* ---- the file's integrity trailer ----
 * tlmc appends TLM_SO_TRAILER_SIZE bytes after the linked ELF image (ELF
 * loaders ignore bytes past what the headers name):
 *   8 bytes   TLM_SO_TRAILER_MAGIC
 *   8 bytes   the image's length in bytes, little-endian (the file's size
 *             less the trailer)
 *   32 bytes  the SHA-256 of the image (sha256.h)
 * tlm_so_open reads the file once (tlm_open_regular: never a FIFO or a
 * device), checks the trailer first, then the ELF headers, and loads those
 * very bytes from a sealed memory file, so what runs is what was checked.
 * The hash catches damage (a flipped bit, a cut or extended file), not
 * malice: a model.so is native code, to be trusted like any program. */
#define TLM_SO_TRAILER_MAGIC "TLMSEAL1"
enum { TLM_SO_TRAILER_SIZE = 48 };
#define TLM_SO_MAX_BYTES (1ull << 30) /* larger files are refused unread */

/* The trailer for an image of `size` bytes (tlmc appends it). */
void tlm_so_trailer(const uint8_t *image, uint64_t size, uint8_t trailer[TLM_SO_TRAILER_SIZE]);

/* Whether the model.so at path is whole: what tlm_so_open checks before it
 * loads anything (the trailer against the bytes, the ELF headers against
 * the length), without loading it. false with tlm_so_open's reason: for a
 * caller that keeps compiled models and must tell a damaged one from one
 * it can reuse (the study runner). */
bool tlm_so_check_file(const char *path, tlm_err *err);

/* Opens and validates a model.so. Returns false with a one-line reason in
 * err: a file without a trailer, or whose trailer does not match it, is
 * refused before anything in it is loaded. */
bool tlm_so_open(const char *path, tlm_so *m, tlm_err *err);
void tlm_so_close(tlm_so *m);

/* Whether this CPU has every x86 extension the model's CPU kernels may use
 * (the descriptor's cpu_needs; a model.so that records none passes).
 * false with "the kernels were compiled for ...; this CPU lacks ..." in
 * err: a kernel run anyway would die of SIGILL. */
bool tlm_so_cpu_ok(const tlm_so *m, tlm_err *err);

/* A string of the descriptor (validated: always NUL-terminated). */
const char *tlm_so_str(const tlm_so *m, uint32_t offset);
/* Kernel k's symbol names the CPU's fwd entry, STEM "_fwd" (checked when
 * the descriptor is read); the GPU's elementwise kernels are the same
 * STEM's "_act" and "_act_grad". Returns the symbol, *len the stem's
 * length. */
const char *tlm_so_kernel_stem(const tlm_so *m, uint32_t k, int *len);
/* The per-buffer offsets of plan i. */
const int64_t *tlm_so_plan_offsets(const tlm_so *m, int plan);

/* ---- printing: the one text form of the tables, for tlmc --emit-ir and
 * tlm-run info (model_so_print.c) ---- */

/* The model's settings: architecture, mixer settings, budget, parameter count. */
void tlm_so_print_config(FILE *out, const tlm_so_tables *t);
/* One line per layer: width, the schedule's exact value, kernel. */
void tlm_so_print_layers(FILE *out, const tlm_so_tables *t);
/* One line per kernel specialisation, with the layers that use it. */
void tlm_so_print_kernels(FILE *out, const tlm_so_tables *t);
void tlm_so_print_params(FILE *out, const tlm_so_tables *t);
void tlm_so_print_buffers(FILE *out, const tlm_so_tables *t);
/* One line per op, its operands by slot name (tlm_ops.h). */
void tlm_so_print_ops(FILE *out, const tlm_so_tables *t);
/* Plan `plan`'s sizes and arena; with placements, each buffer's offset,
 * size and lifetime. False when out of memory. */
bool tlm_so_print_plan(FILE *out, const tlm_so_tables *t, int plan, bool placements);
/* Every table, in the order above (tlmc --emit-ir). False when out of memory. */
bool tlm_so_print_all(FILE *out, const tlm_so_tables *t);

#endif
