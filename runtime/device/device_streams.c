/* The device API's streams and events (device.h), dispatched to the
 * backend's table (device_impl.h). */
#include <stdlib.h>

#include "device_impl.h"

struct tlm_event {
    void *handle; /* the backend's */
};

tlm_event *tlm_device_event_create(tlm_device *d, tlm_err *err) {
    tlm_event *e = calloc(1, sizeof *e);
    if (!e) {
        tlm_fail(err, "out of memory for a device event");
        return NULL;
    }
    if (!d->backend->event_create || !d->backend->event_create(d, &e->handle, err)) {
        if (!d->backend->event_create) tlm_fail(err, "the %s device has no events", d->backend->name);
        free(e);
        return NULL;
    }
    return e;
}

void tlm_device_event_destroy(tlm_device *d, tlm_event *e) {
    if (!e) return;
    d->backend->event_destroy(d, e->handle);
    free(e);
}

bool tlm_device_event_record(tlm_device *d, tlm_event *e, tlm_stream s, tlm_err *err) {
    if (!tlm_device_outside_capture(d, "an event record", err)) return false;
    return d->backend->event_record(d, e->handle, s, err);
}

bool tlm_device_stream_wait(tlm_device *d, tlm_stream s, tlm_event *e, tlm_err *err) {
    if (!tlm_device_outside_capture(d, "a stream wait", err)) return false;
    return d->backend->stream_wait(d, s, e->handle, err);
}

tlm_stream tlm_device_launch_stream(tlm_device *d, tlm_stream s) {
    tlm_stream before = d->launch_stream;
    d->launch_stream = s;
    return before;
}

bool tlm_device_comm_stream(tlm_device *d, void **handle, tlm_err *err) {
    if (!d->backend->comm_stream)
        return tlm_fail(err, "the %s device has no driver stream for a library to queue work on", d->backend->name);
    return d->backend->comm_stream(d, handle, err);
}

bool tlm_device_comm_host_call(tlm_device *d, void (*fn)(void *ctx), void *ctx, tlm_err *err) {
    if (!tlm_device_outside_capture(d, "a host call on the comm stream", err)) return false;
    if (!d->backend->comm_host_call)
        return tlm_fail(err, "the %s device queues no host calls: its collectives go through NCCL", d->backend->name);
    return d->backend->comm_host_call(d, fn, ctx, err);
}
