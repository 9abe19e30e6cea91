#ifndef PACKAGER_CDISPATCHQUEUE_SHIM_H
#define PACKAGER_CDISPATCHQUEUE_SHIM_H
// The queue a URLProtocol's startLoading runs on, kept so that an answer that arrives later is handed to the
// URLSession client on that same queue. swift-corelibs-foundation's own protocols do this with the task's
// internal workQueue; a protocol outside Foundation can only name it as "the current queue".
#include <dispatch/dispatch.h>

#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wdeprecated-declarations"
/// The queue the caller runs on, retained; pair with packager_queue_release.
static inline void *packager_current_queue_retained(void) {
    dispatch_queue_t queue = dispatch_get_current_queue();
    dispatch_retain(queue);
    return (void *)queue;
}
#pragma clang diagnostic pop

/// Runs `work(context)` asynchronously on `queue`.
static inline void packager_queue_async(void *queue, void *context, void (*work)(void *)) {
    dispatch_async_f((dispatch_queue_t)queue, context, work);
}

static inline void packager_queue_release(void *queue) {
    dispatch_release((dispatch_queue_t)queue);
}
#endif
