/* Command-line parsing shared by the commands: getopt_long with our own
 * one-line messages (cli_getopt), flags as `--name VALUE` or `--name=VALUE`,
 * numbers checked against their range, and errors as one line on stderr
 * (control characters replaced, so a hostile file name or message cannot
 * spill onto more lines). */
#ifndef TLM_CLI_ARGS_H
#define TLM_CLI_ARGS_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct cli_args {
    const char *cmd;   /* "train", for the messages */
    int argc;
    char **argv;
    const char *flag;  /* the flag matched last (without "=VALUE") */
    const char *val;   /* its value */
    /* cli_getopt's state: started, past the options (only "--" and what
     * follows left), the next argument, the storage behind flag */
    bool started, options_done;
    int i;
    char flag_text[64];
} cli_args;

/* The next option of a->argv, through getopt_long: returns its val from
 * long_options (or its short letter), 1 for a non-option argument (the
 * model's path, wherever it stands, and everything after "--"), -1 at the
 * end, and '?' after a usage error (an unknown option, a missing value, a
 * value given to a switch) has been reported on one line: the command then
 * returns 2. Sets a->val (the value or the argument; NULL for a switch) and
 * a->flag (the option as written, "--batch") for cli_int and cli_real. */
int cli_getopt(cli_args *a, const char *short_options, const struct option *long_options);

/* The non-option argument a->val (cli_getopt returned 1) as the command's
 * MODEL.so: false after a one-line message when *model is already set. */
bool cli_model_path(cli_args *a, const char **model);

/* The value as a file or folder path: false after a one-line message when
 * it is empty, a slip rather than a name (--ckpt "" would otherwise be
 * joined into /checkpoint.safetensors, at the file system's root). */
bool cli_path(cli_args *a, const char **path);

/* cli_path for the command's output (-o): a second one is a usage error
 * rather than the first silently dropped (*path: NULL until the first). */
bool cli_output_path(cli_args *a, const char **path);

/* The value as an integer in [lo, hi] / a finite real >= lo (> lo when
 * lo_open); false after a one-line message. */
bool cli_int(cli_args *a, int64_t lo, int64_t hi, int64_t *out);
bool cli_real(cli_args *a, double lo, bool lo_open, double *out);

/* "tlm-run CMD: message" on one line of stderr; cli_usage_error adds a
 * pointer to --help. Both return the exit status they stand for (1, 2). */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
int cli_error(const char *cmd, const char *fmt, ...);

/* "tlm-run CMD: note: message" on stderr, the same way: something the
 * user should know about a run that goes on. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void cli_note(const char *cmd, const char *fmt, ...);
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
int cli_usage_error(const char *cmd, const char *fmt, ...);

/* false, with a usage error, when the flag's value looks like a long
 * option (`--out --force`): the value was most likely forgotten. */
bool cli_value_not_option(cli_args *a);

/* "SIGINT", "SIGTERM" or "SIGHUP": the signals that stop train and study
 * (NULL for another). */
const char *cli_signal_name(int sig);

/* The number of processors available to this process (at least 1). */
int cli_cores(void);

#endif
