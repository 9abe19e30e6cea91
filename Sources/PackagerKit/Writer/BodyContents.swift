import Foundation
import OfflineBundle

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A body's bytes while it is hashed and compressed: small files are read with one `read`, large ones mapped.
enum BodyContents {
    /// Files up to this size are read into memory; larger ones are mapped (mapping and unmapping many small files costs more than reading them).
    static let smallFileLimit = 1 << 20

    case bytes([UInt8])
    case data(Data)

    init(_ source: BundleWriter.BodySource) throws {
        switch source {
        case .data(let data): self = .data(data)
        case .bundle(let bundle, let entry): self = .data(try bundle.body(of: entry))
        case .file(let path):
            // Not through a symbolic link: `pack` walked the folder and took regular files only, and a link swapped in
            // since (pointing out of the folder) is refused rather than read.
            let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
            guard fd >= 0 else { throw PackagerError(.io, "cannot read \(path)", subject: path, cause: SystemCallError(errno)) }
            defer { close(fd) }
            var info = stat()
            guard fstat(fd, &info) == 0 else { throw PackagerError(.io, "cannot read \(path)", subject: path, cause: SystemCallError(errno)) }
            let size = Int(info.st_size)
            if (info.st_mode & S_IFMT) != S_IFREG || size == 0 {
                // A FIFO, a /proc file, or a file whose size the system does not know: read it to the end.
                self = .bytes(try Self.readToEnd(fd, path: path))
                return
            }
            if size > Self.smallFileLimit {
                do {
                    self = .data(try Data(contentsOf: URL(fileURLWithPath: path), options: .alwaysMapped))
                } catch {
                    throw PackagerError(.io, "cannot read \(path): \(error.localizedDescription)", subject: path)
                }
                return
            }
            var failure: Int32 = 0
            let bytes = [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
                switch FileIO.read(fd, into: UnsafeMutableRawBufferPointer(buffer)) {
                case .done(let n): count = n
                case .failed(let error):
                    failure = error
                    count = 0
                }
            }
            if failure != 0 { throw PackagerError(.io, "cannot read \(path)", subject: path, cause: SystemCallError(failure)) }
            if bytes.count < size { throw PackagerError(.io, "\(path) shrank while it was read", subject: path) }
            self = .bytes(bytes)
        }
    }

    private static func readToEnd(_ fd: Int32, path: String) throws -> [UInt8] {
        var bytes = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            switch chunk.withUnsafeMutableBytes({ FileIO.read(fd, into: $0) }) {
            case .failed(let error): throw PackagerError(.io, "cannot read \(path)", subject: path, cause: SystemCallError(error))
            case .done(let n):
                bytes.append(contentsOf: chunk[0..<n])
                if n < chunk.count { return bytes }
            }
        }
    }

    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        switch self {
        case .bytes(let bytes): return try bytes.withUnsafeBytes(body)
        case .data(let data): return try data.withUnsafeBytes(body)
        }
    }
}
