import Foundation
import NIOConcurrencyHelpers
import OfflineBundle

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The writer's one file for compressed bodies beyond the memory budget, in the run's scratch folder.
///
/// Bodies are appended from the preparing threads and read back in order when the bundle is written.
final class OverflowFile: Sendable {
    private struct State {
        var fd: Int32 = -1
        var end: UInt64 = 0
    }

    private let path: String
    private let state = NIOLockedValueBox(State())

    init(in scratch: ScratchFolder) {
        path = scratch.path(for: "overflow-\(UInt32.random(in: 0...UInt32.max))")
    }

    deinit {
        state.withLockedValue { state in
            if state.fd >= 0 {
                close(state.fd)
                unlink(path)
            }
        }
    }

    /// Appends bytes and returns where they start.
    func append(_ bytes: [UInt8]) throws -> UInt64 {
        let (fd, offset): (Int32, UInt64) = try state.withLockedValue { state in
            if state.fd < 0 {
                state.fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
                guard state.fd >= 0 else { throw PackagerError(.io, "cannot create \(path)", cause: SystemCallError(errno)) }
            }
            defer { state.end += UInt64(bytes.count) }
            return (state.fd, state.end)
        }
        try bytes.withUnsafeBytes { raw in
            if let error = FileIO.write(fd, raw, at: offset) {
                throw PackagerError(.io, "cannot write \(path)", cause: SystemCallError(error))
            }
        }
        return offset
    }

    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws {
        let fd = state.withLockedValue { $0.fd }
        guard FileIO.read(fd, into: buffer, at: offset) == .done(buffer.count) else { throw PackagerError(.io, "cannot read back \(path)") }
    }
}
