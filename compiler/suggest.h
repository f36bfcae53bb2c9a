/* "did you mean `cosine`?": the closest candidate by edit distance, if it is
 * close enough to be a plausible typo. */
#ifndef TLM_SUGGEST_H
#define TLM_SUGGEST_H

#include <stddef.h>

typedef struct suggester {
    const char *word;
    const char *best;
    size_t best_distance;
} suggester;

void suggest_begin(suggester *s, const char *word);
void suggest_consider(suggester *s, const char *candidate);
void suggest_list(suggester *s, const char *const *candidates);
/* The best candidate, or NULL if none is close. */
const char *suggest_result(const suggester *s);

#endif
