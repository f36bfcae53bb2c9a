/* --device for every command: "cpu" (the default) or "cuda[:N]". */
#ifndef TLM_CLI_DEVICE_FLAG_H
#define TLM_CLI_DEVICE_FLAG_H

#include "device.h"

/* Checks a --device value: 0 when it names a device, else 2 after a usage
 * message. */
int device_flag_check(const char *cmd, const char *value);
/* Opens the device a checked --device names: *dev NULL for the CPU. 0, or 1
 * after a message (no driver, no such GPU). */
int device_flag_open(const char *cmd, const char *value, tlm_device **dev);
/* The one-line description of where a command runs, for its banner. */
void device_flag_describe(const tlm_device *dev, char *buf, size_t len);

#endif
