/* tlm-run: the runtime's command line. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "stdout_status.h"

#ifndef TLM_VERSION
#define TLM_VERSION "0.0.0"
#endif

static const struct command {
    const char *name;
    int (*run)(int, char **);
    const char *help;
} commands[] = {
    {"info", cmd_info, "settings, layer table, kernels, parameters and memory plans of a model"},
    {"train", cmd_train, "train a model on text; checkpoints, validation, exact resume"},
    {"eval", cmd_eval, "loss, perplexity and bits per byte of a checkpoint on texts"},
    {"probe", cmd_probe, "rho per layer: how much each MLP's output aligns with the residual stream"},
    {"sample", cmd_sample, "generate text from a checkpoint"},
    {"bench", cmd_bench, "steps/s, tokens/s, GFLOP/s and the op profile on random tokens"},
    {"tokenizer", cmd_tokenizer, "encode text to subword token ids and back (GPT-2, Llama 3, tokenizer.json)"},
    {"tokenize", cmd_tokenize, "pre-tokenize text into a shard of token ids"},
    {"export", cmd_export, "write a checkpoint as a GGUF file for llama.cpp (deci/llama, f32, f16, q8_0)"},
    {"study", cmd_study, "run a study of a .tlm file: variants x seeds, statistics, results and plots"},
};

static void usage(FILE *out) {
    fputs("usage: tlm-run COMMAND MODEL.so [options]\n\ncommands:\n", out);
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].help);
    fputs("\n`tlm-run COMMAND --help` describes a command's options.\n"
          "Exit status: 0 ok, 1 error (bad model, file or data), 2 bad usage.\n",
          out);
}

static int run(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("tlm-run %s\n", TLM_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "tlm-run: unknown command `%s`\n", argv[1]);
    usage(stderr);
    return 2;
}

int main(int argc, char **argv) {
    char prog[64] = "tlm-run";
    if (argc >= 2 && strlen(argv[1]) < 32 && argv[1][0] != '-') snprintf(prog, sizeof prog, "tlm-run %s", argv[1]);
    return tlm_stdout_status(prog, run(argc, argv));
}
