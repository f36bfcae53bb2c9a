#include "gpu_peaks.h"

#include <ctype.h>
#include <stdbool.h>
#include <string.h>

/* Dense bf16 with fp32 accumulation, from NVIDIA's data sheets (half the
 * "with sparsity" figure). First match wins, so a variant comes before its
 * family. */
static const struct {
    const char *name_has;
    double tflops;
} peaks[] = {
    {"H100 PCIe", 756}, {"H100 NVL", 835}, {"H100", 989},  {"H200 NVL", 835}, {"H200", 989}, {"GH200", 989},
    {"H800 PCIe", 756}, {"H800", 989},     {"B200", 2250}, {"B100", 1750},    {"A100", 312}, {"A800", 312},
    {"L40S", 362},      {"L40", 181},      {"A10G", 70},   {"L4", 121},       {"A10", 125},  {"RTX 6000 Ada", 364},
};

/* Whether key is in name as whole words: "A100" in "NVIDIA A100-SXM4-80GB",
 * not in "NVIDIA RTX A1000" (another GPU, a twentieth of the peak), nor
 * "H200" in "GH200", nor "L40" in "L40S". */
static bool has_words(const char *name, const char *key) {
    size_t n = strlen(key);
    for (const char *p = name; (p = strstr(p, key)) != NULL; p++)
        if ((p == name || !isalnum((unsigned char)p[-1])) && !isalnum((unsigned char)p[n])) return true;
    return false;
}

double tlm_gpu_peak_bf16_tflops(const char *name) {
    for (size_t i = 0; i < sizeof peaks / sizeof *peaks; i++)
        if (has_words(name, peaks[i].name_has)) return peaks[i].tflops;
    return 0;
}
