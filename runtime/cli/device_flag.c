#include "device_flag.h"

#include <stdio.h>
#include <string.h>

#include "args.h"

/* "cuda" or "cuda:N", N of 1 to 9 digits (tlm_device_open says whether
 * that GPU exists). */
static bool is_cuda(const char *v) {
    if (!strcmp(v, "cuda")) return true;
    if (strncmp(v, "cuda:", 5) != 0) return false;
    size_t n = strspn(v + 5, "0123456789");
    return n >= 1 && n <= 9 && v[5 + n] == '\0';
}

bool device_flag_is_cpu(const char *device) { return !device || !strcmp(device, "cpu"); }

int device_flag_check(const char *cmd, const char *value) {
    if (device_flag_is_cpu(value) || is_cuda(value)) return 0;
    return cli_usage_error(cmd, "unknown device `%s` (known: cpu, cuda, cuda:N)", value);
}

int precision_flag_check(const char *cmd, const char *value) {
    tlm_precision p;
    if (tlm_precision_parse(value, &p)) return 0;
    return cli_usage_error(cmd, "unknown precision `%s` (known: bf16, fp32)", value);
}

int precision_flag_resolve(const char *cmd, const char *device, const char *value, tlm_precision *p) {
    bool gpu = !device_flag_is_cpu(device);
    if (!value) {
        *p = gpu ? TLM_PRECISION_BF16 : TLM_PRECISION_FP32;
        return 0;
    }
    if (precision_flag_check(cmd, value)) return 2;
    tlm_precision_parse(value, p);
    if (!gpu && *p != TLM_PRECISION_FP32)
        return cli_usage_error(cmd, "--precision %s needs --device cuda: the CPU computes in fp32", value);
    return 0;
}
