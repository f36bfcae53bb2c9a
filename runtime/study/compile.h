/* Compiling a study's variants into OUT/models/VARIANT.so. A model is
 * compiled again only when its recipe changed, it is not whole (its
 * integrity trailer, tlm_so_check_file) or it is not the .so compiled for
 * it: VARIANT.so.hash beside it holds the SHA-256 of the .tlm file's
 * bytes, the plan (canonical JSON), the variant's name and `tlmc
 * --version`, then the SHA-256 of the .so tlmc wrote. tlmc writes into a temporary
 * VARIANT.tmp.so, renamed into place before the hash is written, so a kill
 * during a compile leaves nothing that looks up to date. */
#ifndef TLM_STUDY_COMPILE_H
#define TLM_STUDY_COMPILE_H

#include <stdbool.h>

#include "plan.h"
#include "progress.h"
#include "spawn.h"

/* Each variant's .so up to date in dir, and its SHA-256 (hex) in
 * digests[variant], which the runs' records name it by: the hash file's
 * check hashes the .so anyway. false with a message (tlmc's last line and
 * its log's path) when a compile fails; false when a signal stopped the
 * study (stop->count), tlmc stopped by it too (spawn.h). */
bool study_compile(const study_plan *plan, const char *tlmc, const char *dir, char (*digests)[65], study_progress *pr,
                   const study_stop *stop, tlm_err *err);

#endif
