import Foundation
import OfflineBundle
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// `packager serve --scrub`: after each mount, every body of the bundles mounted is read through its checks on a
/// thread of its own at the lowest scheduling priority, so a damaged body too large to be checked before it is sent is
/// refused from its first request (``MountedBundle/scrub(shouldStop:)``). A scrub still running when the next mount
/// comes stops: the bundles it reads no longer answer.
final class Scrubber: Sendable {
    /// Counts mounts: a scrub stops once a later mount began one of its own.
    private let generation = Atomic<UInt64>(0)
    private let events: EventLog
    /// Mounts made before ``start()``: their scrubs wait, so none of its lines comes before serve's first.
    private let held = Mutex<[[MountedBundle]]?>([])

    init(events: EventLog) { self.events = events }

    /// Starts the scrubs held until now, and each later one at once.
    func start() {
        for bundles in held.withLock({ held -> [[MountedBundle]] in
            defer { held = nil }
            return held ?? []
        }) {
            scrub(bundles)
        }
    }

    func scrub(_ bundles: [MountedBundle]) {
        let waiting = held.withLock { held -> Bool in
            guard held != nil else { return false }
            held?.append(bundles)
            return true
        }
        if waiting { return }
        let mine = generation.add(1, ordering: .relaxed).newValue
        let thread = Thread { [self] in
            #if canImport(Glibc)
                // Nice 19 for this thread alone: on Linux the nice value is a thread's, and 0 names the calling one.
                _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 19)
            #endif
            let started = Date()
            for bundle in bundles {
                let report = bundle.scrub { self.generation.load(ordering: .relaxed) != mine }
                if report.stopped { return }
                var line = "scrubbed \(bundle.label): \(report.checked + report.alreadyChecked) bodies checked"
                line += String(format: " in %.1f s", Date().timeIntervalSince(started))
                let fields = [("bundle", bundle.label), ("checked", String(report.checked + report.alreadyChecked)), ("damaged", String(report.damaged.count))]
                if report.damaged.isEmpty {
                    events.info("scrubbed", line + ", none damaged", fields)
                } else {
                    line += ", \(report.damaged.count) damaged (refused from now on: their requests answer 500):"
                    for (name, error) in report.damaged.prefix(20) { line += "\n  \(name): \(error.message)" }
                    if report.damaged.count > 20 { line += "\n  … and \(report.damaged.count - 20) more" }
                    events.warning("scrubbed", line, fields)
                }
            }
        }
        thread.name = "packager-scrub"
        thread.start()
    }
}
