#include "long_options.h"

#include <stdio.h>
#include <string.h>

/* The name's length in `--name` or `--name=VALUE`. */
static size_t name_length(const char *text) { return strcspn(text + 2, "="); }

static bool names_one(const char *text, const struct option *options) {
    size_t n = name_length(text);
    for (int k = 0; options[k].name; k++)
        if (strlen(options[k].name) == n && !strncmp(options[k].name, text + 2, n)) return true;
    return false;
}

const char *tlm_long_option_abbreviation(int opt, int longindex, char *const *argv, const struct option *options) {
    const char *text;
    if (opt == ':') text = argv[optind - 1]; /* the option without its value */
    else if (opt == '?' && optopt != 0) {
      /* a long option given a value it does not take (an unknown short
       * letter lands here too, with argv[optind - 1] not its text) */
        text = argv[optind - 1];
        if (!strchr(text, '=')) return NULL;
    } else if (opt != -1 && longindex >= 0) {
      /* a value given as the next argument is argv[optind - 1]; the option
       * is the one before it (a value after '=' lies inside its text) */
        text = optarg && optarg == argv[optind - 1] && optind >= 2 ? argv[optind - 2] : argv[optind - 1];
    } else return NULL;
    return strncmp(text, "--", 2) == 0 && !names_one(text, options) ? text : NULL;
}

void tlm_long_option_unknown(const char *text, size_t shown, const struct option *options, char *buf, size_t size) {
    size_t n = strncmp(text, "--", 2) == 0 ? name_length(text) : 0;
    int used = snprintf(buf, size, "unknown option `%.*s`", (int)shown, text);
    int total = 0, found = 0;
    for (int k = 0; n && options[k].name; k++) total += !strncmp(options[k].name, text + 2, n);
    for (int k = 0; total && options[k].name && used > 0 && (size_t)used < size; k++) {
        if (strncmp(options[k].name, text + 2, n) != 0) continue;
        found++;
        const char *before = found == 1 ? " (did you mean " : found == total ? " or " : ", ";
        used +=
            snprintf(buf + used, size - (size_t)used, "%s--%s%s", before, options[k].name, found == total ? "?)" : "");
    }
}
