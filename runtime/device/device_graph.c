/* The device API's graphs (device.h): the capture's state, the refusal of
 * what a capture forbids, and dispatch to the backend's table
 * (device_impl.h). The backends record and replay; this file makes both
 * refuse the same calls with the same line. */
#include <stdlib.h>

#include "device_impl.h"

struct tlm_graph {
    void *handle; /* the backend's */
};

bool tlm_device_outside_capture(tlm_device *d, const char *what, tlm_err *err) {
    if (!d->capturing) return true;
    tlm_err e;
    tlm_fail(&e,
             "%s during a CUDA graph capture: a captured step may only launch kernels, GEMMs, copies and zeroings on "
             "the device (what it reads must be there before the graph runs)",
             what);
    if (!d->capture_spoiled) {
        d->capture_spoiled = true;
        d->capture_error = e;
    }
    return tlm_fail(err, "%s", e.msg);
}

bool tlm_device_capturing(const tlm_device *d) { return d->capturing; }

bool tlm_device_capture_begin(tlm_device *d, tlm_err *err) {
    if (d->capturing) return tlm_fail(err, "a CUDA graph capture is already under way on this device");
    if (!d->backend->capture_begin) return tlm_fail(err, "the %s device has no graphs", d->backend->name);
    if (d->launch_stream != TLM_STREAM_COMPUTE)
        return tlm_fail(err, "a CUDA graph is captured from the compute stream only");
    if (!d->backend->capture_begin(d, err)) return false;
    d->capturing = true;
    d->capture_spoiled = false;
    return true;
}

tlm_graph *tlm_device_capture_end(tlm_device *d, bool *instantiate_failed, tlm_err *err) {
    if (instantiate_failed) *instantiate_failed = false;
    if (!d->capturing) {
        tlm_fail(err, "no CUDA graph capture is under way on this device");
        return NULL;
    }
    d->capturing = false;
    tlm_graph *g = calloc(1, sizeof *g);
    const bool keep = g && !d->capture_spoiled;
    tlm_err why = {{0}};
    bool ended = d->backend->capture_end(d, keep, keep ? &g->handle : NULL, &why);
    if (d->capture_spoiled) {
        tlm_fail(err, "%s", d->capture_error.msg);
    } else if (!g) {
        tlm_fail(err, "out of memory for a CUDA graph");
    } else if (!ended) {
        if (instantiate_failed) *instantiate_failed = true;
        tlm_fail(err, "%s", why.msg);
    } else {
        return g;
    }
    free(g);
    return NULL;
}

bool tlm_device_graph_launch(tlm_device *d, tlm_graph *g, tlm_err *err) {
    if (!g) return tlm_fail(err, "graph launch: no graph");
    if (!tlm_device_outside_capture(d, "a graph launch", err)) return false;
    return d->backend->graph_launch(d, g->handle, err);
}

void tlm_device_graph_destroy(tlm_device *d, tlm_graph *g) {
    if (!g) return;
    d->backend->graph_destroy(d, g->handle);
    free(g);
}
