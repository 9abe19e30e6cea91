#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The one place that loops over `read`, `write`, `pread` and `pwrite` until a whole buffer is done, retrying EINTR.
///
/// Every function returns the bytes done (which is short only at the end of the file, for reads) or the `errno` of
/// the failure; callers turn that into their own error type.
package enum FileIO {
    /// A new file in `folder` for the process alone: made with a name of `prefix` and random letters, close-on-exec
    /// from the start (a child started meanwhile does not inherit it), and unlinked at once; its descriptor, or -1
    /// with errno set.
    package static func unlinkedFile(in folder: String, prefix: String) -> Int32 {
        for _ in 0..<16 {
            let path = folder + "/" + prefix + "-" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
            let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            if fd >= 0 {
                unlink(path)
                return fd
            }
            if errno != EEXIST { return -1 }
        }
        return -1
    }

    package enum Outcome: Equatable {
        case done(Int)
        case failed(Int32)
    }

    /// Writes all of `bytes` at the file's position; nil on success, else errno.
    package static func write(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Int32? {
        loop(bytes.count, zeroIs: EIO) { done in systemWrite(fd, bytes.baseAddress! + done, bytes.count - done) }.failure
    }

    /// Writes all of `bytes` at `offset`; nil on success, else errno.
    package static func write(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, at offset: UInt64) -> Int32? {
        loop(bytes.count, zeroIs: EIO) { done in pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done)) }.failure
    }

    /// Fills `buffer` from the file's position, stopping early only at the end of the file.
    package static func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) -> Outcome {
        loop(buffer.count) { done in systemRead(fd, buffer.baseAddress! + done, buffer.count - done) }
    }

    /// Fills `buffer` from `offset`, stopping early only at the end of the file.
    package static func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) -> Outcome {
        loop(buffer.count) { done in pread(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset) + off_t(done)) }
    }

    /// Calls `step` until `count` bytes are done. A step of 0 bytes ends a read (end of file); for a write, which
    /// must not come back short, it is the failure `zeroIs`.
    private static func loop(_ count: Int, zeroIs failure: Int32? = nil, _ step: (Int) -> Int) -> Outcome {
        var done = 0
        while done < count {
            let n = step(done)
            if n < 0 {
                if errno == EINTR { continue }
                return .failed(errno)
            }
            if n == 0 {
                if let failure { return .failed(failure) }
                break
            }
            done += n
        }
        return .done(done)
    }
}

// At file scope, where `read` and `write` are the C library's (inside FileIO they would name its own functions).
private func systemRead(_ fd: Int32, _ buffer: UnsafeMutableRawPointer, _ count: Int) -> Int { read(fd, buffer, count) }
private func systemWrite(_ fd: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int { write(fd, buffer, count) }

extension FileIO.Outcome {
    /// The errno of a failure, or nil.
    package var failure: Int32? {
        if case .failed(let error) = self { return error }
        return nil
    }
}

/// A system call's failure, kept as a value (the `errno`), so an error can carry its cause rather than only its
/// sentence: `BundleError.underlying`, `PackagerError.cause`. Its description is the C library's, lowercased.
package struct SystemCallError: Error, Equatable, CustomStringConvertible, ReasonText {
    /// The `errno` the call set.
    package var code: Int32

    package init(_ code: Int32) { self.code = code }

    package var description: String { String(cString: strerror(code)).lowercased() }
}

/// A cause whose description is a reason in words, printed after its error's message (`cannot open x: permission
/// denied`); other causes (a YAML parser's error, whose position the message already gives) are kept, not printed.
package protocol ReasonText: CustomStringConvertible {}
