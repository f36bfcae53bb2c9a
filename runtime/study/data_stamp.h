/* What a study's runs were trained and scored on, as a stamp: the study's
 * data, validation and evaluation files (the plan's paths), each by name,
 * size and modification time (a folder by those of the files training
 * reads from it). A run
 * records the stamp it was trained with; a file replaced or edited since
 * gives another stamp, and the run's numbers would be of the old data
 * mixed with the new (runner.c refuses them, as it refuses a changed
 * model). Size and time, not contents: a study's data can be gigabytes of
 * shards, read again at every start. */
#ifndef TLM_STUDY_DATA_STAMP_H
#define TLM_STUDY_DATA_STAMP_H

#include "plan.h"

/* The plan's data stamp as 64 hex digits (a SHA-256 of what each file is).
 * A path that cannot be read is stamped as such ("missing"): training says
 * why. Returns the same as a listing, a line a file ("SIZE SECONDS.NANOS
 * PATH" or "missing PATH"; malloc'd, "" when out of memory, NULL only when
 * even that fails), which a run keeps beside its stamp so that a changed
 * stamp can name its file. */
char *study_data_stamp(const study_plan *plan, char hex[65]);

/* Whether the listings name a file that differs (changed, gone, missing
 * then, no longer there or new: a folder's file), and then which and how,
 * in why: "PATH changed since: 20000 bytes then, 20100 now". false when
 * none can be named (equal, or a damaged listing). */
bool study_data_change(const char *then, const char *now, char *why, size_t n_why);

#endif
