/* Long options spelled whole. getopt_long takes any unique prefix of a long
 * option ("--bat" for --batch, "--over" for --overwrite) and calls a prefix
 * of several an unknown option. Neither program promises abbreviations:
 * one would change meaning the day a flag sharing its prefix is added, and
 * a script using it would then run something else. Both programs refuse
 * them, naming the options the user may have meant. */
#ifndef TLM_LONG_OPTIONS_H
#define TLM_LONG_OPTIONS_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>

/* After getopt_long returned long option o (its index), with optind and
 * optarg as it left them: whether the command line spelled it whole
 * (`--name` or `--name=VALUE`). *text gets the spelling, `--bat` or
 * `--bat=3`, either way. */
bool tlm_long_option_whole(char *const *argv, int optind, const char *optarg, const struct option *o,
                           const char **text);

/* Whether text (`--bat`, `--overw=1`) names no long option whole but
 * begins one or more: getopt_long's error paths (a missing value, a value
 * not taken) name the option it took the prefix for, which is no option
 * here. */
bool tlm_long_option_abbreviated(const char *text, const struct option *options);

/* The long options whose names begin with the name in text (`--eval`,
 * `--eval=3`: `eval`), as "--eval-every or --eval-batches" in buf; false
 * (buf empty) when there are none. */
bool tlm_long_option_guess(const char *text, const struct option *options, char *buf, size_t size);

#endif
