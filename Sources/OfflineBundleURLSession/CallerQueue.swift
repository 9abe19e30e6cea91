#if canImport(CDispatchQueue)
    internal import CDispatchQueue
#endif

/// The dispatch queue a call arrived on, kept to run later work there.
final class CallerQueue: @unchecked Sendable {
    // Unchecked: the queue handle is immutable, and dispatch queues are thread-safe.
    #if canImport(CDispatchQueue)
        private let queue: UnsafeMutableRawPointer

        private init(queue: UnsafeMutableRawPointer) { self.queue = queue }
        deinit { packager_queue_release(queue) }

        /// The queue the caller runs on (for a URLProtocol in startLoading: its task's work queue).
        static func current() -> CallerQueue { CallerQueue(queue: packager_current_queue_retained()) }

        func async(_ work: @escaping @Sendable () -> Void) {
            let box = Unmanaged.passRetained(Work(work)).toOpaque()
            packager_queue_async(queue, box) { context in
                Unmanaged<Work>.fromOpaque(context!).takeRetainedValue().run()
            }
        }

        private final class Work {
            let run: @Sendable () -> Void
            init(_ run: @escaping @Sendable () -> Void) { self.run = run }
        }
    #else
        /// Apple's URLSession accepts client calls from any thread.
        static func current() -> CallerQueue { CallerQueue() }
        func async(_ work: @escaping @Sendable () -> Void) { work() }
    #endif
}
