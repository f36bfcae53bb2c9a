/* Learning-rate schedules: linear warm-up, then constant, cosine or linear
 * decay to min_lr (formulas in optim.h). */
#include "tlm_rt/optim.h"

#include <math.h>

static const double PI = 3.14159265358979323846;

float tlm_lr_at(const tlm_lr_schedule *s, long step) {
    if (step < 0) step = 0;
    if (s->warmup > 0 && step < s->warmup) {
        return (float)((double)s->max_lr * (double)(step + 1) / (double)s->warmup);
    }
    if (s->kind == TLM_LR_CONSTANT) return s->max_lr;
    long span = s->total - s->warmup;
    if (span <= 0 || step >= s->total) return s->min_lr;
    double p = (double)(step - s->warmup) / (double)span;
    double hi = s->max_lr, lo = s->min_lr;
    if (s->kind == TLM_LR_COSINE) { return (float)(lo + (hi - lo) * 0.5 * (1.0 + cos(PI * p))); }
    return (float)(hi + (lo - hi) * p);
}
