#include "gpu_peaks.h"

#include <string.h>

/* Dense bf16 with fp32 accumulation, from NVIDIA's data sheets. First
 * match wins, so a variant comes before its family. */
static const struct {
    const char *name_has;
    double tflops;
} peaks[] = {
    {"H100 PCIe", 756}, {"H100 NVL", 835}, {"H100", 989},  {"H200", 989}, {"GH200", 989},        {"H800 PCIe", 756},
    {"H800", 989},      {"B200", 2250},    {"B100", 1750}, {"A100", 312}, {"A800", 312},         {"L40S", 362},
    {"L40", 181},       {"A10G", 70},      {"L4", 121},    {"A10", 125},  {"RTX 6000 Ada", 364},
};

double tlm_gpu_peak_bf16_tflops(const char *name) {
    for (size_t i = 0; i < sizeof peaks / sizeof *peaks; i++)
        if (strstr(name, peaks[i].name_has)) return peaks[i].tflops;
    return 0;
}
