import Foundation

/// Checking every body of a mount ahead of its readers (`packager serve --scrub`), and refusing those that failed.
extension MountedBundle {
    /// Throws when ``scrub(shouldStop:)`` found body `bodyIndex` damaged and the file is still the one it read.
    package func refuseIfScrubbedDamaged(_ bodyIndex: Int) throws {
        guard damaged.contains(bodyIndex), bodyFile(bodyIndex).unchanged else { return }
        throw BundleError(
            .corruptBody, "the body failed its checks when the mount was scrubbed: it is damaged or was replaced", entry: bodyName(bodyRecord(at: bodyIndex)))
    }

    /// What ``scrub(shouldStop:)`` found.
    public struct ScrubReport: Sendable {
        /// Bodies read through their checks (those already checked in this mount are not read again).
        public var checked = 0
        /// Bodies that passed before the scrub came to them.
        public var alreadyChecked = 0
        /// Bodies that failed, with why: refused from now on, so their first reader gets an error answer, not a cut.
        public var damaged: [(name: String, error: BundleError)] = []
        /// Whether `shouldStop` ended the scrub before the last body.
        public var stopped = false
        /// Bytes read from the bundle files.
        public var bytesRead: UInt64 = 0
    }

    /// Reads every body not yet checked in this mount through its checks (CRC-32, or SHA-256 when the mount checks
    /// by SHA-256), as a read would, without keeping it: a body that passes is trusted from then on (and sent without
    /// its checks, or by `sendfile`), one that fails is refused from then on, so even a body too large to be checked
    /// before it is sent (``Options/checkBeforeSend``) is never sent damaged. `packager serve --scrub` runs it on a
    /// low-priority thread after each mount.
    ///
    /// Blocks on file reads for as long as reading the whole bundle takes: call it off Swift's cooperative pool.
    /// A bundle read from a server (``BundleLocation/remote(_:_:)``) is not scrubbed: it would fetch every
    /// body; its bodies are checked against their SHA-256 when fetched. `shouldStop` is asked before each body.
    public func scrub(shouldStop: () -> Bool = { false }) -> ScrubReport {
        var report = ScrubReport()
        for bodyIndex in 0..<index.bodyCount {
            if shouldStop() {
                report.stopped = true
                break
            }
            let file = bodyFile(bodyIndex)
            guard file.remote == nil else { continue }
            if isVerified(bodyIndex) {
                report.alreadyChecked += 1
                continue
            }
            let reader = BodyReader(bundle: self, bodyIndex: bodyIndex, shape: .identity, chunkSize: 256 << 10, keep: false)
            do {
                try reader.drain()
                report.checked += 1
            } catch let error as BundleError {
                damaged.insert(bodyIndex)
                report.damaged.append((bodyName(bodyRecord(at: bodyIndex)), error))
            } catch {
                damaged.insert(bodyIndex)
                report.damaged.append((bodyName(bodyRecord(at: bodyIndex)), BundleError(.io, "\(error)")))
            }
            report.bytesRead += reader.bytesRead
        }
        return report
    }
}
