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

/* The plan's data stamp as 64 hex digits (SHA-256 of the listing). A path
 * that cannot be read is stamped as such ("missing"): training says why. */
void study_data_stamp(const study_plan *plan, char hex[65]);

#endif
