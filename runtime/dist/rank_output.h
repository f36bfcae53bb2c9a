/* What the ranks other than 0 print: nothing on stdout (rank 0 alone shows
 * progress), and, while the run starts, their stderr held back so that a
 * failure every rank sees (a bad flag, a missing file) is told once, by
 * rank 0; a failure only one rank saw is passed to rank 0 to tell
 * (dist.h: tlm_dist_agree_status). */
#ifndef TLM_DIST_RANK_OUTPUT_H
#define TLM_DIST_RANK_OUTPUT_H

#include <stddef.h>

/* On rank > 0: stdout to /dev/null for good, stderr into a temporary file
 * until rank_output_release. No-op on rank 0. */
void rank_output_quiet(int rank);
/* stderr back where it was; msg gets the first line held back ("" when
 * none). */
void rank_output_release(char *msg, size_t n);

#endif
