/* The architecture a checkpoint was trained as: written beside its tensors
 * as JSON (`config`), and compared with the model it is loaded into. The
 * parameters' names and shapes do not tell two architectures apart (heads,
 * rope_base, norm_eps, a Titans chunk), and a model recompiled with another
 * of them would run the trained weights as a different network. */
#ifndef TLM_CHECKPOINT_CONFIG_H
#define TLM_CHECKPOINT_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "errmsg.h"
#include "model_so.h"

/* The model's architecture as one JSON object (malloc'd; NULL: out of
 * memory), so that a PyTorch user can build the module the state dict
 * belongs to, as a Hugging Face config.json would. */
char *tlm_ckpt_config_json(const tlm_so *so);

/* Whether a checkpoint's `config` (NULL: a checkpoint that has none) allows
 * it into model so: every setting it records equal to the model's, except
 * `context`, which a model may be recompiled to change (positions are
 * rotated, not learned). A setting the checkpoint does not record is not
 * compared. path names the checkpoint in the message. */
bool tlm_ckpt_config_matches(const char *config, const tlm_so *so, const char *path, tlm_err *err);

/* The longest window the checkpoint was trained on: its training run's
 * `settings` context (the last run's, for a resumed one), else its
 * `config`'s, the model's it was trained by; -1 when neither records a
 * whole number. A model may be recompiled for another context (above), and
 * a window past this one holds positions the weights never saw. */
int64_t tlm_ckpt_trained_context(const char *settings, const char *config);

#endif
