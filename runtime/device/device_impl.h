/* What an implementation of the device API provides (Lua's luaL_Reg, one
 * table per backend): device.c checks the arguments that are the same for
 * both and calls through this table. */
#ifndef TLM_DEVICE_IMPL_H
#define TLM_DEVICE_IMPL_H

#include "device.h"

/* The dynamic shared memory any kernel may have without opting in. */
enum { TLM_SHARED_DEFAULT = 48 * 1024 };

typedef struct tlm_device_backend {
    const char *name;  /* "cuda", "emulated" */
    /* Fills d->info; impl points to the backend's own state. */
    bool (*open)(tlm_device *d, int ordinal, tlm_err *err);
    void (*close)(tlm_device *d);
    tlm_dptr (*alloc)(tlm_device *d, size_t bytes, tlm_err *err); /* zero-filled */
    void (*free)(tlm_device *d, tlm_dptr p);
    bool (*upload)(tlm_device *d, tlm_dptr dst, const void *src, size_t bytes, tlm_err *err);
    bool (*download)(tlm_device *d, void *dst, tlm_dptr src, size_t bytes, tlm_err *err);
    bool (*copy)(tlm_device *d, tlm_dptr dst, tlm_dptr src, size_t bytes, tlm_err *err);
    bool (*zero)(tlm_device *d, tlm_dptr dst, size_t bytes, tlm_err *err);
    bool (*sync)(tlm_device *d, tlm_err *err);
    /* The bytes the device can still give, as it counts them (NULL: total
     * less what we hold). */
    bool (*memory_free)(tlm_device *d, uint64_t *bytes, tlm_err *err);
    /* The compiler's identity for the cache key ("nvrtc 13.0", the host
     * C++ compiler's --version line), and the options it compiles with. */
    const char *(*compiler_id)(tlm_device *d);
    const char *(*compile_options)(tlm_device *d);
    /* source -> binary (a CUBIN, or a host shared object); malloc'd */
    bool (*compile)(tlm_device *d, const char *what, const char *source, uint8_t **bin, size_t *size, tlm_err *err);
    /* binary -> loaded module (backend state in *handle) */
    bool (*load)(tlm_device *d, const char *what, const uint8_t *bin, size_t size, void **handle, tlm_err *err);
    void (*unload)(tlm_device *d, void *handle);
    /* a kernel by name in a loaded module (backend state in *fn), and its
     * static shared memory (bytes; 0 where the backend cannot tell) */
    bool (*kernel)(tlm_device *d, void *module_handle, const char *name, void **fn, unsigned *static_shared,
                   tlm_err *err);
    /* Lets kernel fn have `bytes` of dynamic shared memory, past what every
     * block may have without opting in: 48 KiB (TLM_SHARED_DEFAULT) less its
     * static shared memory (NULL: nothing to do). */
    bool (*allow_shared)(tlm_device *d, void *fn, const char *name, unsigned bytes, tlm_err *err);
    bool (*launch)(tlm_device *d, void *fn, const char *name, tlm_launch dims, void **args, tlm_err *err);
    bool (*gemm)(tlm_device *d, const tlm_gemm *g, tlm_err *err);  /* already checked */
    /* Streams and events (device.h): an event is the backend's handle;
     * launches go to d->launch_stream. comm_stream and comm_host_call may
     * be NULL (device_streams.c then says why). */
    bool (*event_create)(tlm_device *d, void **event, tlm_err *err);
    void (*event_destroy)(tlm_device *d, void *event);
    bool (*event_record)(tlm_device *d, void *event, tlm_stream s, tlm_err *err);
    bool (*stream_wait)(tlm_device *d, tlm_stream s, void *event, tlm_err *err);
    bool (*comm_stream)(tlm_device *d, void **handle, tlm_err *err);
    bool (*comm_host_call)(tlm_device *d, void (*fn)(void *ctx), void *ctx, tlm_err *err);
    /* Graphs (device.h; device_graph.c keeps the capture's state and
     * refuses what a capture forbids): while d->capturing, launch, gemm,
     * copy and zero record instead of running. capture_end with keep false
     * discards what was captured (a spoiled capture); with keep true it
     * hands back the executable graph or fails to instantiate it. */
    bool (*capture_begin)(tlm_device *d, tlm_err *err);
    bool (*capture_end)(tlm_device *d, bool keep, void **graph, tlm_err *err);
    bool (*graph_launch)(tlm_device *d, void *graph, tlm_err *err);
    void (*graph_destroy)(tlm_device *d, void *graph);
} tlm_device_backend;

struct tlm_device {
    const tlm_device_backend *backend;
    tlm_device_info info;
    uint64_t bytes_in_use;  /* kept by device.c over alloc/free */
    tlm_stream launch_stream; /* where launches go (device.h: tlm_device_launch_stream) */
    bool capturing;         /* between capture_begin and capture_end (device_graph.c) */
    bool capture_spoiled;   /* a call the capture forbids was made; capture_error says which */
    tlm_err capture_error;
    tlm_kernel_times *times; /* NULL, or where each launch's and GEMM's time goes (kernel_times.h) */
    void *impl;             /* the backend's state */
};

extern const tlm_device_backend tlm_device_cuda;     /* device_cuda.c */
extern const tlm_device_backend tlm_device_emulated; /* device_emu.c */

/* device_graph.c: false with one line (and the capture spoiled) when d is
 * capturing, for a call a capture forbids; `what` names the call. */
bool tlm_device_outside_capture(tlm_device *d, const char *what, tlm_err *err);

#endif
