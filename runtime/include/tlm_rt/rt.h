/* tlm_rt: the numeric core of the tlm runtime (static library).
 * One include for everything; see runtime/README.md for the overview. */
#ifndef TLM_RT_RT_H
#define TLM_RT_RT_H

#include "tlm_rt/data.h"
#include "tlm_rt/error.h"
#include "tlm_rt/json.h"
#include "tlm_rt/ops.h"
#include "tlm_rt/optim.h"
#include "tlm_rt/rng.h"
#include "tlm_rt/safetensors.h"
#include "tlm_rt/sample.h"

#endif
