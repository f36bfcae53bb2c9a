/* tlm-run export: a checkpoint as a GGUF file for llama.cpp (runtime/export:
 * the format, the tensor types and the mapping onto llama.cpp's `deci` or
 * `llama` architecture; docs/export.md). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "atomic_file.h"
#include "commands.h"
#include "gguf.h"
#include "llama_map.h"
#include "load.h"
#include "quant.h"

static void usage(FILE *out) {
    fputs("usage: tlm-run export MODEL.so [--ckpt DIR] -o FILE.gguf [--type f32|f16|q8_0]\n"
          "\n"
          "Writes the checkpoint as a GGUF file that llama.cpp runs: architecture deci (an\n"
          "MLP width per layer) or llama (one width), Q and K in llama.cpp's RoPE layout, and\n"
          "the byte-level vocabulary (token i is byte i; no BOS or EOS is added).\n"
          "  --ckpt DIR          the checkpoint's folder or file (default: checkpoints/MODEL)\n"
          "  -o, --output FILE   the GGUF file to write (atomically: a temporary, then renamed)\n"
          "  --type T            the matrices' type: f32 (default), f16 or q8_0 (blocks of 32\n"
          "                      with an fp16 scale; a matrix whose rows are not a multiple\n"
          "                      of 32 stays f16, and the export says which); norms stay f32\n"
          "\n"
          "Gated Attention, Titans, Hope-attention and GELU MLPs have no llama.cpp\n"
          "counterpart and are refused.\n"
          "Exit status: 0 ok, 1 error (model, checkpoint, unwritable file), 2 bad usage.\n",
          out);
}

enum { OPT_CKPT = 256, OPT_TYPE };
static const struct option long_options[] = {
    {"help", no_argument, NULL, 'h'},
    {"ckpt", required_argument, NULL, OPT_CKPT},
    {"output", required_argument, NULL, 'o'},
    {"type", required_argument, NULL, OPT_TYPE},
    {NULL, 0, NULL, 0},
};

static int export_to(const tlm_so *so, const char *ckpt, const char *out, enum tlm_ggml_type type) {
    tlm_err err = {""};
    char why[256];
    if (tlm_export_refusal(so, why, sizeof why))
        return cli_error("export", "%s cannot run in llama.cpp: %s", tlm_so_str(so, so->config->name), why);
    tlm_model m = {0};
    char path[4200];
    tlm_strbuf kept = {0};
    int64_t step, trained = -1;
    if (!tlm_model_create(&m, so, 1, 1, false, 0, &err)) return cli_error("export", "%s", err.msg);
    char tokenizer[65];
    int rc = load_checkpoint("export", so, ckpt, &m, path, sizeof path, &step, tokenizer, &trained);
    if (!rc && !tlm_output_not_input(out, path, "the checkpoint", &err)) rc = cli_error("export", "%s", err.msg);
    /* the GGUF carries the byte vocabulary: a model trained on subword
     * tokens would need its tokenizer written instead (not done yet) */
    if (!rc && strcmp(tokenizer, "bytes") != 0)
        rc = cli_error("export",
                       "%s was trained on tokens of tokenizer %.16s..., not bytes; exporting a subword vocabulary is "
                       "not supported yet",
                       path, tokenizer);
    if (!rc && tlm_export_unrepresentable(so, m.params, type, why, sizeof why))
        rc = cli_error("export", "%s: %s", path, why);
    tlm_gguf g = {0};
    /* llama.cpp's context_length is the window the weights were trained on
     * (its n_ctx_train), which a model recompiled for another context no
     * longer holds */
    const int64_t context = trained > 0 ? trained : so->config->context;
    if (!rc && !tlm_export_llama(so, m.params, type, context, &g, &kept)) rc = cli_error("export", "out of memory");
    if (!rc && !tlm_gguf_write(&g, out, &err)) rc = cli_error("export", "%s", err.msg);
    if (!rc) {
        uint64_t size = tlm_gguf_file_size(&g);
        char st[24];
        printf("%s: %s step %s, %s, %llu bytes (%.2f MiB)\n", out, path, step_text(step, st), tlm_ggml_type_name(type),
               (unsigned long long)size, (double)size / 1048576.0);
        if (kept.len) printf("kept f16 (rows not a multiple of 32): %s\n", kept.buf);
        if (context != so->config->context)
            printf("context_length %" PRId64 ": the checkpoint's training windows, not the model's context (%" PRId64
                   ")\n",
                   context, so->config->context);
    }
    free(kept.buf);
    tlm_gguf_free(&g);
    tlm_model_destroy(&m);
    return rc;
}

int cmd_export(int argc, char **argv) {
    const char *model_path = NULL, *ckpt = NULL, *out = NULL, *type_name = "f32";
    cli_args a = {.cmd = "export", .argc = argc, .argv = argv};
    int opt;
    while ((opt = cli_getopt(&a, "ho:", long_options)) != -1) {
        switch (opt) {
        case 'h': usage(stdout); return 0;
        case OPT_CKPT:
            if (!cli_path(&a, &ckpt)) return 2;
            break;
        case 'o':
            if (!cli_output_path(&a, &out)) return 2;
            break;
        case OPT_TYPE: type_name = a.val; break;
        case 1:
            if (!cli_model_path(&a, &model_path)) return 2;
            break;
        default: return 2; /* reported by cli_getopt */
        }
    }
    enum tlm_ggml_type type;
    if (!strcmp(type_name, "f32")) type = TLM_GGML_F32;
    else if (!strcmp(type_name, "f16")) type = TLM_GGML_F16;
    else if (!strcmp(type_name, "q8_0")) type = TLM_GGML_Q8_0;
    else return cli_usage_error("export", "--type %s: expected f32, f16 or q8_0", type_name);
    if (!model_path) return cli_usage_error("export", "no MODEL.so given");
    if (!out) return cli_usage_error("export", "no output file given (-o FILE.gguf)");
    tlm_err err = {""};
    if (!tlm_output_not_input(out, model_path, "the model", &err)) return cli_error("export", "%s", err.msg);
    tlm_so so;
    int rc = open_model("export", model_path, 0, &so);
    if (rc) return rc;
    rc = export_to(&so, ckpt, out, type);
    tlm_so_close(&so);
    return rc;
}
