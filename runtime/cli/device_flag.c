#include "device_flag.h"

#include <stdio.h>
#include <string.h>

#include "args.h"
#include "tlm_rt/ops.h"

/* "cuda" or "cuda:N", N of 1 to 9 digits (tlm_device_open says whether
 * that GPU exists). */
static bool is_cuda(const char *v) {
    if (!strcmp(v, "cuda")) return true;
    if (strncmp(v, "cuda:", 5) != 0) return false;
    size_t n = strspn(v + 5, "0123456789");
    return n >= 1 && n <= 9 && v[5 + n] == '\0';
}

int device_flag_check(const char *cmd, const char *value) {
    if (!value || !strcmp(value, "cpu") || is_cuda(value)) return 0;
    return cli_usage_error(cmd, "unknown device `%s` (known: cpu, cuda, cuda:N)", value);
}

int device_flag_open(const char *cmd, const char *value, tlm_device **dev) {
    *dev = NULL;
    if (!value || !strcmp(value, "cpu")) return 0;
    tlm_err err = {""};
    *dev = tlm_device_open(value, &err);
    return *dev ? 0 : cli_error(cmd, "--device %s: %s", value, err.msg);
}

void device_flag_describe(const tlm_device *dev, char *buf, size_t len) {
    if (!dev) {
        int n = tlm_get_num_threads();
        snprintf(buf, len, "cpu, %d thread%s", n, n == 1 ? "" : "s");
        return;
    }
    const tlm_device_info *i = tlm_device_get_info(dev);
    snprintf(buf, len, "cuda:%d %s (%s, %.1f GiB)", i->ordinal, i->name, i->arch,
             (double)i->memory_total / 1073741824.0);
}
