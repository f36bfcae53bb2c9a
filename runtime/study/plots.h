/* The plots of a study, as SVG files beside results.md:
 *   loss_curves.svg  validation loss against step per variant: the mean
 *                    over seeds, a band from the lowest to the highest seed
 *   widths.svg       d_ff against layer for every variant (from the plan)
 *   ppl.svg          final validation perplexity per variant, mean ± 1 sd
 *   rho.svg          rho against layer per variant (probe), mean over seeds
 * A plot with nothing to show (no validation, no probe) is left out. */
#ifndef TLM_STUDY_PLOTS_H
#define TLM_STUDY_PLOTS_H

#include "summary.h"

enum { STUDY_MAX_PLOTS = 4 };

/* Writes the plots into dir (atomically); names[] receives the basenames
 * written. The count, or -1 with a reason. */
int study_plots_write(const study_summary *s, const char *dir, const char *names[STUDY_MAX_PLOTS], tlm_err *err);

/* The SVG text of each plot (malloc'd; NULL when it has nothing to show). */
char *study_plot_loss_curves(const study_summary *s);
char *study_plot_widths(const study_summary *s);
char *study_plot_ppl(const study_summary *s);
char *study_plot_rho(const study_summary *s);

#endif
