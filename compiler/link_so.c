#include "link_so.h"

#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "codegen_error.h"
#include "model_so.h"
#include "xalloc.h"

extern char **environ;

static bool on_path(const char *name) {
    if (strchr(name, '/')) return access(name, X_OK) == 0;
    const char *path = getenv("PATH");
    if (!path) path = "/usr/bin:/bin";
    char buf[4096];
    for (const char *p = path; *p;) {
        const char *colon = strchr(p, ':');
        size_t n = colon ? (size_t)(colon - p) : strlen(p);
        snprintf(buf, sizeof buf, "%.*s/%s", (int)n, p, name);
        if (access(buf, X_OK) == 0) return true;
        p += n + (colon != NULL);
    }
    return false;
}

static const char *find_linker(void) {
    const char *env = getenv("TLM_LD");
    if (env && *env) return env;
    static const char *const candidates[] = {"ld.lld-19", "ld.lld", "ld"};
    for (size_t i = 0; i < sizeof candidates / sizeof *candidates; i++)
        if (on_path(candidates[i])) return candidates[i];
    return NULL;
}

/* Appends the integrity trailer (model_so.h) to the linker's output, the
 * temporary file not yet renamed into place. */
static bool append_trailer(const char *tmp, const char *out_path, char **err) {
    FILE *f = fopen(tmp, "r+b");
    if (!f) return codegen_fail(err, "cannot write %s: %s", out_path, strerror(errno));
    uint8_t *image = NULL;
    long size = -1;
    errno = 0;
    bool ok = fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0;
    if (ok) {
        image = tlm_xmalloc(size ? (size_t)size : 1);
        ok = fread(image, 1, (size_t)size, f) == (size_t)size;
    }
    if (ok) {
        uint8_t trailer[TLM_SO_TRAILER_SIZE];
        tlm_so_trailer(image, (uint64_t)size, trailer);
        ok = fseek(f, 0, SEEK_END) == 0 && fwrite(trailer, 1, sizeof trailer, f) == sizeof trailer;
    }
    int error = errno;
    free(image);
    if (fclose(f) != 0 && ok) {
        ok = false;
        error = errno;
    }
    if (!ok) return codegen_fail(err, "cannot write %s: %s", out_path, error ? strerror(error) : "short read");
    return true;
}

bool link_shared_object(const char *const *objects, int n, const char *out_path, char **err) {
    const char *ld = find_linker();
    if (!ld) {
        codegen_fail(err, "no linker found (tried ld.lld-19, ld.lld, ld); install lld-19 or binutils");
        return false;
    }
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", out_path, (int)getpid());
    const char **argv = tlm_xcalloc((size_t)n + 10, sizeof *argv);
    int k = 0;
    argv[k++] = ld;
    argv[k++] = "-shared";
    argv[k++] = "-z";
    argv[k++] = "noexecstack";
    argv[k++] = "-o";
    argv[k++] = tmp;
    for (int i = 0; i < n; i++) argv[k++] = objects[i];
    argv[k] = NULL;
    pid_t pid;
    int rc = posix_spawnp(&pid, ld, NULL, NULL, (char *const *)argv, environ);
    free(argv);
    if (rc != 0) { return codegen_fail(err, "cannot run %s: %s", ld, strerror(rc)); }
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) { return codegen_fail(err, "waiting for %s: %s", ld, strerror(errno)); }
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        unlink(tmp);
        return codegen_fail(err, "%s failed (status %d)", ld, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
    if (!append_trailer(tmp, out_path, err)) {
        unlink(tmp);
        return false;
    }
    if (rename(tmp, out_path) != 0) {
        codegen_fail(err, "cannot write %s: %s", out_path, strerror(errno));
        unlink(tmp);
        return false;
    }
    return true;
}
