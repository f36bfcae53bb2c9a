/* Error reporting for the runtime: tlm_err and tlm_fail, the one way the
 * runtime fails (abi/errmsg.h, shared with the model.so reader). Functions
 * that can fail on user input (files, data, formats) return 0 on success
 * and -1 on failure (or false, or NULL) with a message in a caller-owned
 * tlm_err. They never abort. */
#ifndef TLM_RT_ERROR_H
#define TLM_RT_ERROR_H

#include "errmsg.h"

#endif
