#include "link_so.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "atomic_file.h"
#include "codegen_error.h"
#include "model_so.h"
#include "remove_on_signal.h"
#include "xalloc.h"

extern char **environ;

/* The bytes lld's own temporary adds to its output's name: ".tmp" and
 * seven random characters (LLVM's FileOutputBuffer). */
enum { LLD_TEMP_SUFFIX = 11 };

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
    /* the linker writes the temporary; the trailer is appended to it, then
     * it is renamed into place (atomic_file.h) */
    tlm_atomic_file out;
    tlm_err why = {""};
    /* an output name of 234 to 244 bytes made lld's temporary too long */
    if (!tlm_atomic_open_spare(&out, out_path, LLD_TEMP_SUFFIX, &why)) return codegen_fail(err, "%s", why.msg);
    close(out.fd);
    out.fd = -1;
    const char *tmp = out.tmp;
    const char **argv = tlm_xcalloc((size_t)n + 10, sizeof *argv);
    int k = 0;
    argv[k++] = ld;
    argv[k++] = "-shared";
    argv[k++] = "-z";
    argv[k++] = "noexecstack";
    /* lld writes through its own temporary, named from the output's path
     * with every '%' in it made random: a '%' in a folder's name sent it to
     * a folder that does not exist. It runs in the output's folder and is
     * given the file's name alone (the objects' paths are absolute). */
    const char *slash = strrchr(tmp, '/');
    char *dir = slash ? strndup(tmp, (size_t)(slash - tmp) + 1) : NULL;
    argv[k++] = "-o";
    argv[k++] = slash ? slash + 1 : tmp;
    for (int i = 0; i < n; i++) argv[k++] = objects[i];
    argv[k] = NULL;
    /* A signal that ends tlmc stops the linker first: left running, it
     * wrote the output's temporary after the handler had removed it. So
     * the handler knows the linker from its start (the signals held until
     * it is registered; the linker gets the mask tlmc had) to its end (it
     * is forgotten while still a zombie, waitid's WNOWAIT, so that its pid
     * cannot be another process's when the handler kills it). */
    sigset_t handled, before;
    tlm_signals_handled(&handled);
    sigprocmask(SIG_BLOCK, &handled, &before);
    pid_t pid;
    posix_spawn_file_actions_t in_dir;
    posix_spawnattr_t attr;
    int rc = posix_spawn_file_actions_init(&in_dir), attr_rc = posix_spawnattr_init(&attr);
    if (!rc) rc = attr_rc;
    if (!rc) rc = posix_spawnattr_setsigmask(&attr, &before);
    if (!rc) rc = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
    if (!rc && dir) rc = posix_spawn_file_actions_addchdir_np(&in_dir, dir);
    if (!rc) rc = posix_spawnp(&pid, ld, &in_dir, &attr, (char *const *)argv, environ);
    if (!rc) tlm_stop_child_on_signal(pid);
    sigprocmask(SIG_SETMASK, &before, NULL);
    if (!attr_rc) posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&in_dir);
    free(dir);
    free(argv);
    if (rc != 0) {
        tlm_atomic_abort(&out);
        return codegen_fail(err, "cannot run %s: %s", ld, strerror(rc));
    }
    siginfo_t ended;
    int status = 0, waited;
    while ((waited = waitid(P_PID, (id_t)pid, &ended, WEXITED | WNOWAIT)) < 0 && errno == EINTR) continue;
    tlm_stop_child_on_signal(0);
    if (waited == 0)
        while ((waited = waitpid(pid, &status, 0)) < 0 && errno == EINTR) continue;
    if (waited < 0) {
        int e = errno;
        tlm_atomic_abort(&out);
        return codegen_fail(err, "waiting for %s: %s", ld, strerror(e));
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        tlm_atomic_abort(&out);
        if (!WIFSIGNALED(status)) return codegen_fail(err, "%s failed (exit status %d)", ld, WEXITSTATUS(status));
        /* lld writes its output through a memory map: a disk that fills
         * under it ends it with SIGBUS, and its crash report says nothing
         * of the disk */
        int sig = WTERMSIG(status);
        return codegen_fail(err, "%s was killed by signal %d (%s)%s", ld, sig, strsignal(sig),
                            sig == SIGBUS ? ": is the disk of the output full?" : "");
    }
    if (!append_trailer(tmp, out_path, err)) {
        tlm_atomic_abort(&out);
        return false;
    }
    /* a descriptor again, for the commit's fsync */
    if ((out.fd = open(tmp, O_RDONLY | O_CLOEXEC)) < 0 || !tlm_atomic_commit(&out, &why)) {
        if (out.fd < 0) snprintf(why.msg, sizeof why.msg, "%s: %s", out_path, strerror(errno));
        tlm_atomic_abort(&out);
        return codegen_fail(err, "%s", why.msg);
    }
    return true;
}
