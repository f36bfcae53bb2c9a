/* --device for every command: "cpu" (the default) or "cuda[:N]". Its
 * syntax only (the settings fuzzer links it alone); opening the device is
 * load.h's. */
#ifndef TLM_CLI_DEVICE_FLAG_H
#define TLM_CLI_DEVICE_FLAG_H

/* Checks a --device value: 0 when it names a device, else 2 after a usage
 * message. */
int device_flag_check(const char *cmd, const char *value);

#endif
