#include "kernel_loader.h"

#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef TLM_TEST_CC
#define TLM_TEST_CC "cc"
#endif

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static char *message(const char *what, const char *detail) {
    size_t n = strlen(what) + strlen(detail) + 3;
    char *m = malloc(n);
    snprintf(m, n, "%s: %s", what, detail);
    return m;
}

bool kernel_lib_make_dir(kernel_lib *lib, char **err) {
    memset(lib, 0, sizeof *lib);
    const char *tmp = getenv("TMPDIR");
    snprintf(lib->dir, sizeof lib->dir, "%s/tlm_codegen_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(lib->dir)) {
        *err = message("mkdtemp failed", lib->dir);
        lib->dir[0] = 0;
        return false;
    }
    return true;
}

bool kernel_lib_open(kernel_lib *lib, const char *so_path, char **err) {
    lib->handle = dlopen(so_path, RTLD_NOW | RTLD_LOCAL);
    if (!lib->handle) {
        *err = message("dlopen failed", dlerror());
        return false;
    }
    return true;
}

bool kernel_lib_build(kernel_lib *lib, const tlm_kernel_spec *specs, int n, const tlm_codegen_options *opt,
                      char **err) {
    if (!kernel_lib_make_dir(lib, err)) return false;
    char obj[300], so[300], cmd[1024];
    snprintf(obj, sizeof obj, "%s/kernels.o", lib->dir);
    snprintf(so, sizeof so, "%s/kernels.so", lib->dir);
    double t0 = now_s();
    bool ok = tlm_codegen_cpu_object(specs, n, opt, obj, err);
    lib->codegen_seconds = now_s() - t0;
    snprintf(cmd, sizeof cmd, "'%s' -shared -o '%s' '%s'", TLM_TEST_CC, so, obj);
    if (ok && system(cmd) != 0) {
        *err = message("linking the kernel object failed", cmd);
        ok = false;
    }
    ok = ok && kernel_lib_open(lib, so, err);
    /* not every caller closes a library that failed to build: its folder
     * (mlp_bench --cpu foo left one in /tmp each run) goes here */
    if (!ok) kernel_lib_close(lib);
    return ok;
}

bool kernel_lib_build_emulated(kernel_lib *lib, const char *cxx, const char *include_dir, const char *source,
                               const tlm_kernel_spec *specs, int n, void (*wrappers)(FILE *, const tlm_kernel_spec *),
                               char **err) {
    if (!kernel_lib_make_dir(lib, err)) return false;
    char cpp[300], so[300], cmd[1400];
    snprintf(cpp, sizeof cpp, "%s/emu.cpp", lib->dir);
    snprintf(so, sizeof so, "%s/emu.so", lib->dir);
    FILE *f = fopen(cpp, "w");
    bool ok = f && fprintf(f, "#include \"cuda_emu.h\"\n%s\n", source) > 0;
    for (int i = 0; ok && i < n; i++) wrappers(f, &specs[i]);
    if (f && fclose(f) != 0) ok = false;
    if (!ok) *err = message("cannot write", cpp);
    snprintf(cmd, sizeof cmd,
             "'%s' -std=c++17 -O1 -fPIC -shared -Wall -Werror -Wno-unused-function -Wno-unknown-pragmas -I'%s' '%s' "
             "-o '%s'",
             cxx, include_dir, cpp, so);
    if (ok && system(cmd) != 0) {
        *err = message("compiling the emulated CUDA source failed", cmd);
        ok = false;
    }
    ok = ok && kernel_lib_open(lib, so, err);
    if (!ok) kernel_lib_close(lib);
    return ok;
}

void *kernel_lib_sym(kernel_lib *lib, const tlm_kernel_spec *s, const char *entry) {
    if (lib->lookup) return lib->lookup(s, entry);
    char name[160];
    size_t n = strlen(lib->prefix);
    memcpy(name, lib->prefix, n);
    tlm_kernel_symbol(s, entry, name + n, sizeof name - n);
    void *p = dlsym(lib->handle, name);
    if (!p) fprintf(stderr, "missing symbol %s\n", name);
    return p;
}

void kernel_lib_close(kernel_lib *lib) {
    if (lib->handle) dlclose(lib->handle);
    DIR *d = lib->dir[0] ? opendir(lib->dir) : NULL;
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.') continue;
            char path[600];
            snprintf(path, sizeof path, "%s/%s", lib->dir, e->d_name);
            unlink(path);
        }
        closedir(d);
        rmdir(lib->dir);
    }
    memset(lib, 0, sizeof *lib);
}
