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

/* After getopt_long returned opt (and longindex, with optind, optarg and
 * optopt as it left them): the long option as the command line spelled it
 * (`--bat`, `--bat=3`) when that is an abbreviation, else NULL. Its error
 * paths count too: a missing value (`--bat`) or a value not taken
 * (`--overw=1`) is reported there under the option getopt took the prefix
 * for, which is no option here. */
const char *tlm_long_option_abbreviation(int opt, int longindex, char *const *argv, const struct option *options);

/* "unknown option `TEXT`" (its first `shown` bytes: an abbreviation is
 * named without its value) with "(did you mean --eval-every or
 * --eval-batches?)" when the name in text (`--eval`, `--eval=3`) begins
 * some of options, into buf. */
void tlm_long_option_unknown(const char *text, size_t shown, const struct option *options, char *buf, size_t size);

#endif
