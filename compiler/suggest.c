#include "suggest.h"

#include <string.h>

enum { MAX_WORD = 64 };

/* Damerau-Levenshtein (optimal string alignment): a swap of two adjacent
 * letters, the commonest typo, costs 1. */
static size_t distance(const char *a, const char *b) {
    size_t n = strlen(a), m = strlen(b);
    if (n > MAX_WORD || m > MAX_WORD) return (size_t)-1;
    size_t d[MAX_WORD + 1][MAX_WORD + 1];
    for (size_t i = 0; i <= n; i++) d[i][0] = i;
    for (size_t j = 0; j <= m; j++) d[0][j] = j;
    for (size_t i = 1; i <= n; i++) {
        for (size_t j = 1; j <= m; j++) {
            size_t cost = a[i - 1] != b[j - 1];
            size_t best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < best) best = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    }
    return d[n][m];
}

void suggest_begin(suggester *s, const char *word) {
    s->word = word;
    s->best = NULL;
    s->best_distance = (size_t)-1;
}

void suggest_consider(suggester *s, const char *candidate) {
    if (!candidate || strcmp(candidate, s->word) == 0) return;
    size_t d = distance(s->word, candidate);
    if (d == (size_t)-1) return;                  /* too long to be a typo of */
    /* Ties go to the alphabetically first, so the hint never depends on the
     * order candidates come in. */
    if (d < s->best_distance || (d == s->best_distance && s->best && strcmp(candidate, s->best) < 0)) {
        s->best_distance = d;
        s->best = candidate;
    }
}

void suggest_list(suggester *s, const char *const *candidates) {
    for (size_t i = 0; candidates[i]; i++) suggest_consider(s, candidates[i]);
}

const char *suggest_result(const suggester *s) {
    size_t len = strlen(s->word);
    /* One edit for short words, up to a third of the word for longer ones. */
    size_t limit = len <= 3 ? 1 : len / 3 + 1;
    if (limit > 3) limit = 3;
    return s->best && s->best_distance <= limit ? s->best : NULL;
}
