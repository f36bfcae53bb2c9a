#include "long_options.h"

#include <stdio.h>
#include <string.h>

/* The name's length in `--name` or `--name=VALUE`. */
static size_t name_length(const char *text) { return strcspn(text + 2, "="); }

bool tlm_long_option_whole(char *const *argv, int optind, const char *optarg, const struct option *o,
                           const char **text) {
  /* a value given as the next argument is argv[optind - 1]; the option is
   * the one before it (a value after '=' lies inside the option's text) */
    *text = argv[optind - 1];
    if (optarg && optarg == argv[optind - 1] && optind >= 2) *text = argv[optind - 2];
    size_t n = name_length(*text);
    return strncmp(*text, "--", 2) != 0 || (n == strlen(o->name) && !strncmp(*text + 2, o->name, n));
}

bool tlm_long_option_abbreviated(const char *text, const struct option *options) {
    if (strncmp(text, "--", 2) != 0) return false;
    size_t n = name_length(text);
    bool begins = false;
    for (int k = 0; options[k].name; k++) {
        if (strncmp(options[k].name, text + 2, n) != 0) continue;
        if (options[k].name[n] == '\0') return false;
        begins = n > 0;
    }
    return begins;
}

bool tlm_long_option_guess(const char *text, const struct option *options, char *buf, size_t size) {
    buf[0] = '\0';
    if (strncmp(text, "--", 2) != 0) return false;
    size_t n = name_length(text), used = 0;
    int found = 0, total = 0;
    for (int k = 0; options[k].name; k++) total += n && !strncmp(options[k].name, text + 2, n);
    for (int k = 0; options[k].name && used < size; k++) {
        if (!n || strncmp(options[k].name, text + 2, n) != 0) continue;
        found++;
        const char *sep = found == 1 ? "" : found == total ? " or " : ", ";
        used += (size_t)snprintf(buf + used, size - used, "%s--%s", sep, options[k].name);
    }
    return found > 0;
}
