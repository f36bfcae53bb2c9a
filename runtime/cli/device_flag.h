/* --device and --precision for every command that runs a model. --device:
 * "cpu" (the default) or "cuda[:N]". Their syntax only (the settings fuzzer
 * links this file alone); opening the device is load.h's. */
#ifndef TLM_CLI_DEVICE_FLAG_H
#define TLM_CLI_DEVICE_FLAG_H

#include <stdbool.h>

#include "precision.h"

/* Whether a --device value (NULL: not given) is the CPU. */
bool device_flag_is_cpu(const char *device);

/* Checks a --device value: 0 when it names a device, else 2 after a usage
 * message. */
int device_flag_check(const char *cmd, const char *value);

/* Checks a --precision value as given (bf16 or fp32), before the other
 * flags: in `--precision --steps 1` the value is `--steps`, said so,
 * rather than the 1 taken for a second model. 0, else 2 after a usage
 * message. */
int precision_flag_check(const char *cmd, const char *value);

/* --precision for a checked --device (NULL: the CPU): "fp32" or "bf16";
 * NULL takes the device's default, bf16 on a GPU and fp32 on the CPU (which
 * computes in fp32 only). 0 with *p set, else 2 after a usage message. */
int precision_flag_resolve(const char *cmd, const char *device, const char *value, tlm_precision *p);

#endif
