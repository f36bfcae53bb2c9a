/* tlm-run: the runtime's command line. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "launcher.h"
#include "stdout_status.h"
#include "tlm_rt/cpu_level.h"

#ifndef TLM_VERSION
#define TLM_VERSION "0.0.0"
#endif

/* model: the command opens a model.so, so TLM_CPU_CAPABILITY (the level of
 * the runtime's kernels, tlm_rt/cpu_level.h) is checked before it runs:
 * study's runs inherit it, and a bad value is refused before the first. */
static const struct command {
    const char *name;
    int (*run)(int, char **);
    bool model;
    const char *help;
} commands[] = {
    {"info", cmd_info, true, "settings, layer table, kernels, parameters and memory plans of a model"},
    {"train", cmd_train, true, "train a model on text; checkpoints, validation, exact resume"},
    {"eval", cmd_eval, true, "loss, perplexity and bits per byte of a checkpoint on texts"},
    {"probe", cmd_probe, true, "rho per layer: how much each MLP's output aligns with the residual stream"},
    {"sample", cmd_sample, true, "generate text from a checkpoint"},
    {"bench", cmd_bench, true, "steps/s, tokens/s, GFLOP/s and the op profile on random tokens"},
    {"tokenizer", cmd_tokenizer, false, "encode text to subword token ids and back (GPT-2, Llama 3, tokenizer.json)"},
    {"tokenize", cmd_tokenize, false, "pre-tokenize text into a shard of token ids"},
    {"export", cmd_export, true, "write a checkpoint as a GGUF file for llama.cpp (deci/llama, f32, f16, q8_0)"},
    {"study", cmd_study, true, "run a study of a .tlm file: variants x seeds, statistics, results and plots"},
};

static const struct command *find_command(const char *name) {
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (!strcmp(name, commands[i].name)) return &commands[i];
    return NULL;
}

static void usage(FILE *out) {
    fputs("usage: tlm-run COMMAND MODEL.so [options]\n\ncommands:\n", out);
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        fprintf(out, "  %-9s %s\n", commands[i].name, commands[i].help);
    fputs("\n`tlm-run COMMAND --help` (or `tlm-run help COMMAND`) describes a command's options.\n"
          "Exit status: 0 ok, 1 error (bad model, file or data), 2 bad usage.\n",
          out);
}

static int run(int argc, char **argv) {
    if (argc < 2) {
        fputs("tlm-run: no command given\n", stderr);
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "help") && argc >= 3) { /* `tlm-run help train`: train's own help */
        const struct command *c = find_command(argv[2]);
        if (c) return c->run(2, (char *[]){argv[2], "--help", NULL});
        fprintf(stderr, "tlm-run: unknown command `%s` (the commands: `tlm-run --help`)\n", argv[2]);
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
    const struct command *c = find_command(argv[1]);
    /* Under mpirun or srun with several processes, every command but train
     * (whose ranks share the work) and study (which refuses, and says why)
     * runs whole in each, its output repeated: said once, by the first,
     * since a sweep of one run a task (`srun -n 8 ... --ckpt r$SLURM_PROCID`)
     * is a use of its own. */
    const char *launcher;
    int ranks = tlm_launcher_size(&launcher);
    if (c && ranks > 1 && strcmp(c->name, "train") != 0 && strcmp(c->name, "study") != 0 && tlm_launcher_rank() == 0) {
        char names[200];
        tlm_launcher_names(names, sizeof names);
        fprintf(stderr,
                "note: started as one of %d processes (%s): each runs `%s` whole (only train shares its work "
                "among several); unset %s to run one\n",
                ranks, launcher, c->name, names);
    }
    if (c) {
        tlm_err err = {""};
        if (c->model && !tlm_cpu_capability_ok(&err)) return cli_error(c->name, "%s", err.msg);
        return c->run(argc - 1, argv + 1);
    }
    fprintf(stderr, "tlm-run: unknown command `%s`\n", argv[1]);
    usage(stderr);
    return 2;
}

int main(int argc, char **argv) {
    /* A file-size limit (ulimit -f) makes write() fail with EFBIG, reported
     * like a full disk (the temporary removed, the old file kept), instead
     * of killing the process with SIGXFSZ mid-write. */
    signal(SIGXFSZ, SIG_IGN);
    char prog[64] = "tlm-run";
    if (argc >= 2 && strlen(argv[1]) < 32 && argv[1][0] != '-') snprintf(prog, sizeof prog, "tlm-run %s", argv[1]);
    return tlm_stdout_status(prog, run(argc, argv));
}
