#include "widths.h"

#include <math.h>
#include <stdlib.h>

#include "cost.h"
#include "numfmt.h"
#include "xalloc.h"

/* The generated kernels' limit (codegen/kernel_symbol.c: the CUDA source's
 * int arithmetic on d_model x width), checked here so that --check and -o
 * agree. */
enum { MAX_WIDTH = 1 << 16 };

static int64_t gcd(int64_t a, int64_t b) {
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

void round_widths(const checked_model *m, int64_t *out) {
    for (int64_t l = 0; l < m->layers; l++) {
        int64_t q = m->quantum;
        out[l] = (int64_t)llround(m->raw_widths[l] / (double)q) * q;
    }
}

/* Every layer keeps at least one quantum, so the widths sum to at least
 * L × q; and L × W must be a multiple of the quantum for them to sum to
 * it. */
static bool budget_reachable(tlm_session *s, const checked_model *m, tlm_loc budget_loc) {
    int64_t L = m->layers, W = m->budget_width, q = m->quantum, S = L * W;
    char a[32], b[32];
    if (W < q) {
        diag_error(&s->diag, budget_loc,
                   "the budget cannot be met with quantum %lld: each of the %lld layers keeps a width of at least "
                   "%lld, so the widths sum to at least %s, more than %lld × %lld = %s",
                   (long long)q, (long long)L, (long long)q, fmt_int(a, sizeof a, L * q, 0), (long long)L, (long long)W,
                   fmt_int(b, sizeof b, S, 0));
        diag_hint(&s->diag, "use a quantum of at most %lld, or a budget of uniform(%lld) or more", (long long)W,
                  (long long)q);
        return false;
    }
    if (S % q == 0) return true;
    diag_error(&s->diag, budget_loc,
               "the budget cannot be met exactly with quantum %lld: "
               "layers × width = %lld × %lld = %s is not a multiple of %lld",
               (long long)q, (long long)L, (long long)W, fmt_int(a, sizeof a, S, 0), (long long)q);
    int64_t step = q / gcd(L, q);                 /* widths W' with L*W' % q == 0 */
    int64_t below = W / step * step, above = below + step;
    int64_t lo = S / q * q, hi = lo + q;
    diag_hint(&s->diag, "the nearest reachable totals are %s (%lld) and %s (+%lld)", fmt_int(a, sizeof a, lo, 0),
              (long long)(lo - S), fmt_int(b, sizeof b, hi, 0), (long long)(hi - S));
    /* W >= q here, so below >= q: every layer can keep its quantum */
    diag_hint(&s->diag, "uniform(%lld) or uniform(%lld) can be met with quantum %lld", (long long)below,
              (long long)above, (long long)q);
    return false;
}

/* The schedule must already sum to the budget; rounding only fixes the last
 * fraction of a quantum per layer. */
static bool budget_respected(tlm_session *s, checked_model *m, tlm_loc dff_loc) {
    int64_t L = m->layers, S = L * m->budget_width;
    double sum = 0;
    for (int64_t l = 0; l < L; l++) sum += m->raw_widths[l];
    if (fabs(sum - (double)S) <= 1e-9 * (double)S + 1e-6) return true;

    int64_t *rounded = tlm_xmalloc((size_t)L * sizeof *rounded), *base = tlm_xmalloc((size_t)L * sizeof *base);
    round_widths(m, rounded);
    for (int64_t l = 0; l < L; l++) base[l] = m->budget_width;
    model_cost got = cost_of_model(m, rounded), want = cost_of_model(m, base);
    free(rounded);
    free(base);
    char a[32], b[32], c[32];
    /* a sum a hair off the budget is printed with the digits that show it
     * (512.00000768, not 512), and its share as what it is (+1.5e-06%) */
    double off = sum - (double)S, pct = 100.0 * off / (double)S;
    diag_error(&s->diag, dff_loc,
               fabs(pct) >= 0.01 ? "the widths break the budget: they sum to %.6g, but uniform(%lld) "
                                   "needs %lld × %lld = %s (%+.6g, %+.2f%%)"
                                 : "the widths break the budget: they sum to %.15g, but uniform(%lld) "
                                   "needs %lld × %lld = %s (%+.6g, %+.2g%%)",
               sum, (long long)m->budget_width, (long long)L, (long long)m->budget_width, fmt_int(a, sizeof a, S, 0),
               off, pct);
    diag_hint(&s->diag, "MLP params: %s against the baseline's %s (%s)", fmt_int(a, sizeof a, got.mlp_params, 0),
              fmt_int(b, sizeof b, want.mlp_params, 0), fmt_int(c, sizeof c, got.mlp_params - want.mlp_params, 1));
    diag_hint(&s->diag, "MLP forward FLOPs per token: %s against %s (%s)",
              fmt_int(a, sizeof a, (int64_t)got.mlp_flops, 0), fmt_int(b, sizeof b, (int64_t)want.mlp_flops, 0),
              fmt_int(c, sizeof c, (int64_t)(got.mlp_flops - want.mlp_flops), 1));
    diag_hint(&s->diag, "a schedule with mean 1 keeps the budget (to rounding: 1e-9 of it); normalize(...) "
                        "rescales one to mean 1");
    return false;
}

/* tiebreak: the layer index, negated when the schedule widens with depth,
 * so that ties go to the wider end. */
typedef struct candidate {
    int64_t layer, tiebreak;
    double remainder;
} candidate;

static int by_remainder(const void *pa, const void *pb) {
    const candidate *a = pa, *b = pb;
    if (fabs(a->remainder - b->remainder) > 1e-9) return a->remainder > b->remainder ? -1 : 1;
    return (a->tiebreak > b->tiebreak) - (a->tiebreak < b->tiebreak);
}

/* Floors every layer to a quantum, then hands the missing quanta to the
 * layers that lost most to the floor. Equal remainders go to the wider end
 * first, so a monotone schedule stays monotone. */
static void distribute(checked_model *m) {
    int64_t L = m->layers, q = m->quantum, S = L * m->budget_width;
    candidate *c = tlm_xmalloc((size_t)L * sizeof *c);
    int64_t floors = 0, direction = m->raw_widths[0] >= m->raw_widths[L - 1] ? 1 : -1;
    for (int64_t l = 0; l < L; l++) {
        double units = m->raw_widths[l] / (double)q;
        double f = floor(units + 1e-9);
        m->widths[l] = (int64_t)f * q;
        floors += m->widths[l];
        c[l] = (candidate){l, direction * l, units - f};
    }
    int64_t missing = (S - floors) / q;
    if (missing < 0) missing = 0;
    if (missing > L) missing = L;
    qsort(c, (size_t)L, sizeof *c, by_remainder);
    for (int64_t k = 0; k < missing; k++) m->widths[c[k].layer] += q;
    free(c);
}

static void warn_if_not_monotone(tlm_session *s, const checked_model *m, tlm_loc dff_loc) {
    int64_t rise = -1, fall = -1;
    for (int64_t l = 0; l + 1 < m->layers; l++) {
        if (m->widths[l + 1] > m->widths[l] && rise < 0) rise = l;
        if (m->widths[l + 1] < m->widths[l] && fall < 0) fall = l;
    }
    if (rise < 0 || fall < 0) return;
    diag_warning(&s->diag, dff_loc,
                 "the widths of `%s` are not monotone in depth: they fall from "
                 "layer %lld to %lld (%lld -> %lld) and rise from layer %lld to %lld (%lld -> %lld)",
                 m->name, (long long)fall, (long long)fall + 1, (long long)m->widths[fall],
                 (long long)m->widths[fall + 1], (long long)rise, (long long)rise + 1, (long long)m->widths[rise],
                 (long long)m->widths[rise + 1]);
    diag_hint(&s->diag, "set `monotone = false;` in the model if this shape is intended");
}

bool fit_widths(tlm_session *s, checked_model *m, tlm_loc dff_loc, tlm_loc budget_loc, tlm_loc quantum_loc) {
    (void)quantum_loc;
    for (int64_t l = 0; l < m->layers; l++) {
        double w = m->raw_widths[l];
        if (!(w > 0)) {
            diag_error(&s->diag, dff_loc, "d_ff must be positive, but it is %.6g at layer %lld", w, (long long)l);
            return false;
        }
        if (w > MAX_WIDTH) {
            diag_error(&s->diag, dff_loc, "d_ff is %.6g at layer %lld; the limit is %d", w, (long long)l, MAX_WIDTH);
            return false;
        }
    }
    if (m->has_budget) {
        if (!budget_reachable(s, m, budget_loc) || !budget_respected(s, m, dff_loc)) return false;
        distribute(m);
    } else {
        round_widths(m, m->widths);
    }
    int64_t q = m->quantum;
    for (int64_t l = 0; l < m->layers; l++) {
        /* Rounding to the nearest quantum keeps a width of at least q/2; the
         * budget floors first, so only q is sure to survive it. */
        if (m->widths[l] <= 0) {
            diag_error(&s->diag, dff_loc, "layer %lld's width %.6g rounds to 0 with quantum %lld", (long long)l,
                       m->raw_widths[l], (long long)q);
            diag_hint(&s->diag, "use a smaller quantum, or a schedule that stays at or above %g",
                      m->has_budget ? (double)q : (double)q / 2);
            return false;
        }
        /* The exact widths were within the limit, but rounding (or a quantum
         * the budget hands out) can carry one past it, where -o would fail. */
        if (m->widths[l] > MAX_WIDTH) {
            diag_error(&s->diag, dff_loc, "layer %lld's width %.6g rounds to %lld with quantum %lld; the limit is %d",
                       (long long)l, m->raw_widths[l], (long long)m->widths[l], (long long)q, MAX_WIDTH);
            diag_hint(&s->diag, "the widest width quantum %lld allows is %lld", (long long)q,
                      (long long)(MAX_WIDTH / q * q));
            return false;
        }
    }
    if (m->warn_nonmonotone) warn_if_not_monotone(s, m, dff_loc);
    return true;
}
