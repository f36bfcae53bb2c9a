/* Finding tlmc and the PNG converters (locate.h, runner.h). */
#include "locate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool executable(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

bool study_which(const char *name, char *out, size_t n) {
    const char *path = getenv("PATH");
    if (!path) return false;
    while (*path) {
        const char *end = strchr(path, ':');
        size_t len = end ? (size_t)(end - path) : strlen(path);
        if (len && (size_t)snprintf(out, n, "%.*s/%s", (int)len, path, name) < n && executable(out)) return true;
        path += len + (end != NULL);
    }
    return false;
}

bool study_find_tlmc(const char *self, char *out, size_t n, tlm_err *err) {
    const char *env = getenv("TLMC");
    if (env && *env) {
        if (!executable(env)) return tlm_fail(err, "TLMC=%s is not an executable file", env);
        snprintf(out, n, "%s", env);
        return true;
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", self);
    char *slash = strrchr(dir, '/');
    if (slash) {
        *slash = '\0';
        if ((size_t)snprintf(out, n, "%s/tlmc", dir) < n && executable(out)) return true;
        if ((size_t)snprintf(out, n, "%s/../compiler/tlmc", dir) < n && executable(out)) return true;
    }
    if (study_which("tlmc", out, n)) return true;
    return tlm_fail(err, "cannot find tlmc: set TLMC to its path, or put it beside tlm-run or on PATH");
}
