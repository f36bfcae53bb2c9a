/* libFuzzer target over the training settings a checkpoint stores as JSON
 * (train_settings_parse, runtime/cli/train_options.c, over the table of
 * abi/tlm_train_settings.h): parse -> write (train_settings_json) -> parse
 * gives the same settings. Settings outside their ranges are read as they
 * are and refused later by train_check; the round trip is promised for
 * those train_check accepts (every setting in its range), and the rest must
 * merely not crash. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_options.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool in_range(const tlm_abi_train *s) {
    for (int i = 0; i < TLM_TRAIN_NSETTINGS; i++)
        if (!tlm_train_in_range(&tlm_train_settings[i], tlm_train_get(s, &tlm_train_settings[i]))) return false;
    return true;
}

static bool same_string(const char *a, const char *b) { return (!a && !b) || (a && b && strcmp(a, b) == 0); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *json = malloc(size + 1);
    if (!json) abort();
    memcpy(json, data, size);
    json[size] = '\0';
    tlm_err err;
    train_options o;
    memset(&o, 0, sizeof o);
    char *strs[3];
    bool ok = train_settings_parse(json, &o.s, &o.decay_embeddings, &strs[0], &strs[1], &strs[2], &err);
    free(json);
    if (!ok) return 0;
    o.data = strs[0];
    o.val = strs[1];
    o.log = strs[2];
    char *again = train_settings_json(&o);
    if (!again) abort();
    tlm_abi_train s2;
    memset(&s2, 0, sizeof s2);
    bool decay2;
    char *strs2[3];
    bool ok2 = train_settings_parse(again, &s2, &decay2, &strs2[0], &strs2[1], &strs2[2], &err);
    if (in_range(&o.s)) {
        if (!ok2) {
            fprintf(stderr, "the settings written back do not parse: %s\n%s\n", err.msg, again);
            abort();
        }
        if (memcmp(&s2, &o.s, sizeof s2) != 0 || decay2 != o.decay_embeddings || !same_string(strs[0], strs2[0]) ||
            !same_string(strs[1], strs2[1]) || !same_string(strs[2], strs2[2])) {
            fprintf(stderr, "the settings changed on the way round:\n%s\n", again);
            abort();
        }
    }
    if (ok2)
        for (int k = 0; k < 3; k++) free(strs2[k]);
    for (int k = 0; k < 3; k++) free(strs[k]);
    free(again);
    return 0;
}
