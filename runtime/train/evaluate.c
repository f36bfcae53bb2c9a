#include "evaluate.h"

#include <stdio.h>
#include <stdlib.h>

static bool alloc_batch(int64_t B, int64_t T, int32_t **x, int32_t **y, tlm_err *err) {
    *x = malloc((size_t)(B * T) * sizeof **x);
    *y = malloc((size_t)(B * T) * sizeof **y);
    if (*x && *y) return true;
    free(*x);
    free(*y);
    tlm_fail(err, "out of memory for an evaluation batch");
    return false;
}

bool tlm_eval_sampled(tlm_model *m, const tlm_dataset *ds, int64_t B, int64_t T, int64_t nbatches, uint64_t seed,
                      tlm_eval_result *out, tlm_err *err) {
    int32_t *x, *y;
    if (!alloc_batch(B, T, &x, &y, err)) return false;
    tlm_rng rng;
    tlm_rng_seed(&rng, seed);
    double sum = 0;
    bool ok = true;
    for (int64_t i = 0; i < nbatches && ok; i++) {
        tlm_err e = {""};
        if (tlm_data_sample_batch(ds, &rng, (int)B, (int)T, x, y, &e) != 0) {
            tlm_fail(err, "%s", e.msg);
            ok = false;
            break;
        }
        sum += tlm_model_forward(m, x, y, B, T);
    }
    free(x);
    free(y);
    if (ok) *out = (tlm_eval_result){sum / (double)nbatches, nbatches * B * T, nbatches * B};
    return ok;
}

bool tlm_eval_windows(tlm_model *m, const tlm_dataset *ds, int64_t B, int64_t T, int64_t max_tokens,
                      tlm_eval_result *out, tlm_err *err) {
    int64_t nwin = (int64_t)tlm_data_num_windows(ds, (int)T);
    if (max_tokens > 0 && max_tokens / T < nwin) nwin = max_tokens / T > 0 ? max_tokens / T : 1;
    if (nwin < 1) {
        tlm_fail(err, "the text is shorter than one window of %lld tokens", (long long)T + 1);
        return false;
    }
    int32_t *x, *y;
    if (!alloc_batch(B, T, &x, &y, err)) return false;
    /* Every window has T tokens, so weighting a batch's mean by its rows
     * gives the mean over all tokens. */
    double sum = 0;
    bool ok = true;
    for (int64_t w = 0; w < nwin && ok; w += B) {
        int64_t rows = nwin - w < B ? nwin - w : B;
        for (int64_t r = 0; r < rows && ok; r++) {
            tlm_err e = {""};
            if (tlm_data_window(ds, (size_t)(w + r), (int)T, x + r * T, y + r * T, &e) != 0) {
                tlm_fail(err, "%s", e.msg);
                ok = false;
            }
        }
        if (ok) sum += tlm_model_forward(m, x, y, rows, T) * (double)rows;
    }
    free(x);
    free(y);
    if (ok) *out = (tlm_eval_result){sum / (double)nwin, nwin * T, nwin};
    return ok;
}

int tlm_data_max_byte(const tlm_dataset *ds) {
    int max = 0;
    if (!ds->bytes) return 0; /* token segments: their ids are checked when they are read */
    for (size_t i = 0; i < ds->n && max < 255; i++)
        if (ds->bytes[i] > max) max = ds->bytes[i];
    return max;
}
