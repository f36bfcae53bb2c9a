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

/* A name a user may carry over from another command, and the option it
 * most likely means here: sample's --length (tokens generated) is asked
 * for as eval's --max-tokens; elsewhere --length means the window. Offered
 * only where the command has the option meant. */
static const char *const synonyms[][2] = {
    {"max-tokens", "length"},
    {"length", "context"},
};

static const char *option_named(const char *name, const struct option *options) {
    for (int k = 0; options[k].name; k++)
        if (!strcmp(options[k].name, name)) return options[k].name;
    return NULL;
}

/* An option the user meant without its prefix: the same name with '-' for
 * '_' (--max_tokens), or its synonym above; NULL if none is in `options`. */
static const char *meant(const char *name, size_t n, const struct option *options) {
    char dashed[64];
    if (n >= sizeof dashed) return NULL;
    for (size_t i = 0; i < n; i++) dashed[i] = name[i] == '_' ? '-' : name[i];
    dashed[n] = 0;
    for (size_t s = 0; s < sizeof synonyms / sizeof *synonyms; s++) {
        const char *other = strcmp(dashed, synonyms[s][0]) ? NULL : option_named(synonyms[s][1], options);
        if (other) return other;
    }
    return option_named(dashed, options);
}

void tlm_long_option_unknown(const char *text, size_t shown, const struct option *options, char *buf, size_t size) {
    size_t n = strncmp(text, "--", 2) == 0 ? name_length(text) : 0;
    int used = snprintf(buf, size, "unknown option `%.*s`", (int)shown, text);
    int total = 0, found = 0;
    for (int k = 0; n && options[k].name; k++) total += !strncmp(options[k].name, text + 2, n);
    const char *other = n && !total ? meant(text + 2, n, options) : NULL;
    if (other && used > 0 && (size_t)used < size)
        snprintf(buf + used, size - (size_t)used, " (did you mean --%s?)", other);
    for (int k = 0; total && options[k].name && used > 0 && (size_t)used < size; k++) {
        if (strncmp(options[k].name, text + 2, n) != 0) continue;
        found++;
        const char *before = found == 1 ? " (did you mean " : found == total ? " or " : ", ";
        used +=
            snprintf(buf + used, size - (size_t)used, "%s--%s%s", before, options[k].name, found == total ? "?)" : "");
    }
}
