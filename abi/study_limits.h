/* How big a study may be: tlmc checks a study block against these, and
 * tlm-run study reads the plan tlmc writes within them (its tables are
 * sized by them), so a study tlmc accepts is one tlm-run runs. */
#ifndef TLM_STUDY_LIMITS_H
#define TLM_STUDY_LIMITS_H

enum { TLM_STUDY_MAX_SEEDS = 64, TLM_STUDY_MAX_VARIANTS = 256 };

#endif
