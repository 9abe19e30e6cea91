// libFuzzer entry point: every input is written to a file and mounted as a bundle; when the mount
// succeeds, each entry is answered as HTTP (ranges, conditionals, HEAD, gzip), looked up again by its
// key, and its body is read, inflated and checked both ways (inflated, and as a raw deflate stream). Any crash, hang, or allocation past libFuzzer's
// -rss_limit_mb is a finding; a thrown BundleError is the expected outcome for a damaged file.
import Foundation
import OfflineBundle

#if canImport(Glibc)
    import Glibc
#endif

let requestVariants: [[(name: String, value: String)]] = [
    [], [("Range", "bytes=0-9")], [("Range", "bytes=-5")], [("Range", "bytes=3-")], [("If-None-Match", "*")],
    [("Accept-Encoding", "gzip")], [("Accept-Encoding", "gzip"), ("Range", "bytes=1-2")], [("If-Modified-Since", "Sun, 06 Nov 1994 08:49:37 GMT")],
]

let scratchPath = "/dev/shm/packager-fuzz-\(getpid()).zip"

/// libFuzzer's entry for programs that keep their own `main` (SwiftPM names the executable's main itself).
@_silgen_name("LLVMFuzzerRunDriver")
func llvmFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt

func fuzzBundleReader(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data else { return 0 }
    let fd = open(scratchPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    guard fd >= 0 else { fatalError("cannot write \(scratchPath)") }
    var done = 0
    while done < size {
        let n = write(fd, data + done, size - done)
        guard n > 0 else { fatalError("cannot write \(scratchPath)") }
        done += n
    }
    close(fd)
    // Bodies are capped at 16 MiB so that a claimed size cannot make the harness itself allocate gigabytes.
    let options = MountedBundle.Options(verification: .sha256, maxBodySize: 16 << 20)
    guard let bundle = try? MountedBundle(path: scratchPath, options: options) else { return 0 }
    // The HTTP side too: conditional, range, HEAD and gzip requests answered from what the file holds.
    let responder = BundleResponder(bundle: bundle)
    for entry in bundle.entries.prefix(64) {
        for headers in requestVariants {
            _ = responder.respond(to: BundleRequest(method: "GET", url: entry.key, headers: headers))
        }
        _ = responder.respond(to: BundleRequest(method: "HEAD", url: entry.key + "?utm_source=x#frag"))
    }
    for entry in bundle.entries.prefix(256) {
        let key = entry.key
        _ = bundle.entry(forKey: key)
        _ = bundle.entry(for: key)
        _ = entry.headers
        _ = entry.header("content-type")
        _ = try? bundle.body(of: entry)
        _ = try? bundle.deflatedBody(of: entry)
    }
    return 0
}

var argc = CommandLine.argc
var argv = CommandLine.unsafeArgv
exit(llvmFuzzerRunDriver(&argc, &argv) { data, size in fuzzBundleReader(data, size) })
