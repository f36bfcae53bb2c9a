/* The options of `tlm-run train`: parsing the flags, laying them over the
 * defaults (the model's `train {}` block, or a checkpoint's settings when
 * resuming), checking them, and the settings as JSON for the checkpoint.
 * The settings' flags, ranges, help, trajectory rule and JSON keys all come
 * from the table in abi/tlm_train_settings.h, which tlmc checks train { }
 * blocks against too. */
#ifndef TLM_CLI_TRAIN_OPTIONS_H
#define TLM_CLI_TRAIN_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "model_so.h"
#include "precision.h"
#include "tlm_abi.h"
#include "tlm_train_settings.h"

typedef struct train_options {
    const char *model;                 /* MODEL.so */
    tlm_abi_train s;                   /* the settings in force */
    bool decay_embeddings;
    const char *data, *val, *log;      /* NULL or "": the bundled corpora; no log */
    const char *ckpt;                  /* --ckpt; NULL: checkpoints/<model> */
    const char *device;
    tlm_precision precision;           /* --precision, or the device's default */
    int threads;
    bool resume, overwrite;
    bool dry_run;                      /* resolve and print the settings, then stop */
    bool profile;                      /* time each op kind (model/profile.h) */
    bool profile_kernels;              /* and, on a device, each kernel and GEMM (device/kernel_times.h) */
    int64_t stop_at;                   /* stop (as if interrupted) after this step; 0: never */

    /* What the command line said, to lay over the defaults. */
    tlm_abi_train flags;
    bool given[TLM_TRAIN_NSETTINGS];
    bool given_decay, given_data, given_val, given_log;
    char *owned[3];                    /* strings read from a checkpoint */
} train_options;

/* Parses argv; returns -1 to go on, or the exit status (0 after --help, 2
 * after a usage error, already reported). */
int train_parse(train_options *o, int argc, char **argv);
void train_options_free(train_options *o);

/* o->s = defaults with the flags laid over them; the strings likewise. */
void train_apply(train_options *o, const tlm_abi_train *defaults, bool decay, const char *data, const char *val,
                 const char *log);

/* A note on out for each flag given that the run's optimizer or schedule
 * does not take (--momentum under adamw, --min-lr under a constant
 * schedule): accepted, so that a sweep may pass one set of flags to every
 * choice, but said, so that no one believes it set something. */
void train_note_unused(const train_options *o, FILE *out);

/* A note on out (the banner's) when the warm-up is longer than the run:
 * the rate never reaches lr. */
void train_note_warmup(const train_options *o, FILE *out);

/* The settings against their ranges, each other and the model: 0, or 2
 * after a message. */
int train_check(const train_options *o, const tlm_so *so);

/* On --resume: the settings that shape the trajectory must equal the
 * checkpoint's (only --steps and the other periods may change). false with
 * a message naming the first difference. */
bool train_same_trajectory(const train_options *o, const tlm_abi_train *ckpt, bool ckpt_decay, tlm_err *err);

/* --dry-run: the settings in force, one `key value` line each (the settings
 * of the table that apply, then decay_embeddings and the data). */
void train_print_settings(FILE *out, const train_options *o);

/* The settings as one JSON object (malloc'd; NULL when out of memory). */
char *train_settings_json(const train_options *o);
/* ... and back: fills s, decay and the three strings (malloc'd, NULL when
 * absent). false with a message when the JSON lacks a setting. */
bool train_settings_parse(const char *json, tlm_abi_train *s, bool *decay, char **data, char **val, char **log,
                          tlm_err *err);

#endif
