/* The statistics of a study: mean and standard deviation over seeds, and
 * the paired comparison of a variant with the baseline (per seed, variant
 * minus baseline trained with the same seed) with a 95% Student t interval.
 *
 * With n seeds and differences d_i: mean d = sum d_i / n, s = sqrt(sum (d_i
 * - d)^2 / (n - 1)), half-width h = t(0.975, n - 1) * s / sqrt(n), interval
 * [d - h, d + h]. The t quantile is computed here, from the regularized
 * incomplete beta function (no table): tests/study checks it against
 * mpmath. One seed has no interval (n - 1 = 0 degrees of freedom). Nor
 * does a verdict rest on s = 0: when every seed gives the same difference
 * (to rounding), the interval has no width because the seeds show no
 * noise, not because there is none. */
#ifndef TLM_STUDY_STATS_H
#define TLM_STUDY_STATS_H

#include <stdbool.h>

/* Mean of x[0..n) (NaN for n = 0); sample standard deviation with n - 1
 * (NaN for n < 2). */
double study_mean(const double *x, int n);
double study_sd(const double *x, int n);

/* The regularized incomplete beta function I_x(a, b), a, b > 0, x in [0, 1]. */
double study_beta_inc(double a, double b, double x);
/* Student's t distribution with dof > 0 degrees of freedom: P(T <= t), and
 * the t with P(T <= t) = p for p in (0, 1). */
double study_t_cdf(double t, double dof);
double study_t_quantile(double p, double dof);

/* The differences' sd below which they count as equal, relative to the
 * largest |value| compared: a few thousand ulps, far below any spread that
 * seeds give. */
#define STUDY_NO_SPREAD 1e-12

/* A paired comparison of n differences at a two-sided confidence level. */
typedef struct study_paired {
    int n;
    double mean, sd;          /* of the differences (sd NaN for n < 2) */
    bool has_interval;        /* n >= 2 */
    bool no_spread;           /* n >= 2 and sd <= STUDY_NO_SPREAD * the largest |value|: no verdict */
    double half_width;        /* t * sd / sqrt(n): the smallest difference the seeds resolve */
    double low, high;         /* mean -/+ half_width */
} study_paired;

study_paired study_paired_diff(const double *variant, const double *baseline, int n, double level);

/* "better" / "worse" when the interval excludes 0 in that direction (for a
 * metric where lower is better, or higher), "within noise" when it holds 0,
 * "no interval (1 seed)" with a single seed, "no spread (equal
 * differences)" when every seed gave the same difference. */
const char *study_verdict(const study_paired *d, bool lower_is_better);

#endif
