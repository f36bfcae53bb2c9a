/* Mean, standard deviation, Student t quantiles and paired intervals. */
#include "stats.h"

#include <float.h>
#include <math.h>

double study_mean(const double *x, int n) {
    if (n <= 0) return NAN;
    double s = 0;
    for (int i = 0; i < n; i++) s += x[i];
    return s / n;
}

double study_sd(const double *x, int n) {
    if (n < 2) return NAN;
    double m = study_mean(x, n), ss = 0;
    for (int i = 0; i < n; i++) ss += (x[i] - m) * (x[i] - m);
    return sqrt(ss / (n - 1));
}

/* The continued fraction of I_x(a, b) (DLMF 8.17.22), evaluated by the
 * modified Lentz method; it converges fast for x < (a + 1) / (a + b + 2). */
static double beta_fraction(double a, double b, double x) {
    const double tiny = 1e-300;
    double c = 1, d = 1 - (a + b) * x / (a + 1);
    if (fabs(d) < tiny) d = tiny;
    d = 1 / d;
    double f = d;
    for (int m = 1; m <= 10000; m++) {
        /* the even term d_2m, then the odd term d_2m+1 */
        double num = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m));
        d = 1 + num * d;
        if (fabs(d) < tiny) d = tiny;
        c = 1 + num / c;
        if (fabs(c) < tiny) c = tiny;
        d = 1 / d;
        f *= d * c;
        num = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1));
        d = 1 + num * d;
        if (fabs(d) < tiny) d = tiny;
        c = 1 + num / c;
        if (fabs(c) < tiny) c = tiny;
        d = 1 / d;
        double step = d * c;
        f *= step;
        if (fabs(step - 1) < 4 * DBL_EPSILON) break;
    }
    return f;
}

double study_beta_inc(double a, double b, double x) {
    if (x <= 0) return 0;
    if (x >= 1) return 1;
    /* x^a (1 - x)^b / B(a, b), in logarithms so large a and b do not overflow */
    double front = exp(lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x));
    if (x < (a + 1) / (a + b + 2)) return front * beta_fraction(a, b, x) / a;
    return 1 - front * beta_fraction(b, a, 1 - x) / b; /* I_x(a, b) = 1 - I_1-x(b, a) */
}

/* P(|T| > t) = I_{dof / (dof + t^2)}(dof / 2, 1 / 2) (DLMF 8.17.2 with the
 * t distribution's density). */
double study_t_cdf(double t, double dof) {
    double tail = 0.5 * study_beta_inc(dof / 2, 0.5, dof / (dof + t * t));
    return t >= 0 ? 1 - tail : tail;
}

/* Bisection on the CDF, which is monotone: slow but safe for any dof, and
 * a study asks for a handful of quantiles. */
double study_t_quantile(double p, double dof) {
    if (!(p > 0 && p < 1) || !(dof > 0)) return NAN;
    if (p < 0.5) return -study_t_quantile(1 - p, dof);
    double lo = 0, hi = 1;
    while (study_t_cdf(hi, dof) < p && hi < 1e300) lo = hi, hi *= 2;
    for (int i = 0; i < 2000 && hi - lo > 1e-15 * hi; i++) {
        double mid = lo + (hi - lo) / 2;
        if (study_t_cdf(mid, dof) < p) lo = mid;
        else hi = mid;
    }
    return lo + (hi - lo) / 2;
}

study_paired study_paired_diff(const double *variant, const double *baseline, int n, double level) {
    study_paired r = {.n = n, .mean = NAN, .sd = NAN, .half_width = NAN, .low = NAN, .high = NAN};
    if (n <= 0) return r;
    double sum = 0, ss = 0, scale = 0;
    for (int i = 0; i < n; i++) sum += variant[i] - baseline[i];
    r.mean = sum / n;
    if (n < 2) return r;
    for (int i = 0; i < n; i++) {
        ss += (variant[i] - baseline[i] - r.mean) * (variant[i] - baseline[i] - r.mean);
        scale = fmax(scale, fmax(fabs(variant[i]), fabs(baseline[i])));
    }
    r.sd = sqrt(ss / (n - 1));
    /* Differences equal in decimal (an accuracy over a small set, a value
     * repeated) subtract to doubles an ulp or so apart: "no spread" is s_d
     * within rounding of the values, not only s_d = 0. */
    r.no_spread = r.sd <= STUDY_NO_SPREAD * scale; /* a NaN (a diverged run) is not "no spread" */
    r.has_interval = true;
    r.half_width = study_t_quantile(1 - (1 - level) / 2, n - 1) * r.sd / sqrt(n);
    r.low = r.mean - r.half_width;
    r.high = r.mean + r.half_width;
    return r;
}

const char *study_verdict(const study_paired *d, bool lower_is_better) {
    /* a run's value that is not finite (a diverged run: its perplexity
     * overflowed, its loss is NaN) leaves no difference to judge; its
     * interval of NaN was "within noise" */
    if (!isfinite(d->mean)) return "not finite (a run diverged?)";
    if (!d->has_interval) return "no interval (1 seed)";
    if (d->no_spread) return "no spread (equal differences)";
    if (!(d->low > 0) && !(d->high < 0)) return "within noise";
    bool lower = d->high < 0;
    return lower == lower_is_better ? "better" : "worse";
}
