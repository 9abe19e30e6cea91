// libFuzzer entry point: every input is a bundle, optionally followed by a request (after a line
// "PACKAGER-REQUEST": method, target, Range, If-None-Match, If-Modified-Since, If-Range and Accept-Encoding, one
// per line, a missing line meaning no such header). The bundle part is written to a file and mounted; when the
// mount succeeds, each entry is answered as HTTP (the fuzzed request, then fixed ranges, conditionals, HEAD and
// gzip), every answer's body is read, the entry is looked up again by its key, and its body is read, inflated and
// checked both ways (inflated, and as a raw deflate stream). Any crash, hang, or allocation past libFuzzer's
// -rss_limit_mb is a finding; a thrown BundleError is the expected outcome for a damaged file. An input that does not
// mount as a bundle is mounted as a delta over docs/vectors/v3-pack.zip (the delta vectors are among the seeds).
import Foundation
import HTTPTypes
import OfflineBundle

#if canImport(Glibc)
    import Glibc
#endif

/// Header fields from name-value pairs (a name that is not a valid field name is dropped, as an HTTP parser would).
func fields(_ pairs: [(name: String, value: String)]) -> HTTPFields {
    var result = HTTPFields()
    for (name, value) in pairs {
        if let fieldName = HTTPField.Name(name) { result.append(HTTPField(name: fieldName, value: value)) }
    }
    return result
}

let requestVariants: [[(name: String, value: String)]] = [
    [], [("Range", "bytes=0-9")], [("Range", "bytes=-5")], [("Range", "bytes=3-")], [("If-None-Match", "*")],
    [("Accept-Encoding", "gzip")], [("Accept-Encoding", "gzip"), ("Range", "bytes=1-2")], [("If-Modified-Since", "Sun, 06 Nov 1994 08:49:37 GMT")],
]

let scratchPath = "/dev/shm/packager-fuzz-\(getpid()).zip"

/// The base the format's delta vectors were made over (docs/vectors/v3-pack.zip), for fuzzed deltas; nil when absent.
let deltaBase: MountedBundle? = {
    let vectors = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("docs/vectors/v3-pack.zip").path
    return try? MountedBundle.mountBlocking(.file(vectors))
}()

/// libFuzzer's entry for programs that keep their own `main` (SwiftPM names the executable's main itself).
@_silgen_name("LLVMFuzzerRunDriver")
func llvmFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt

let requestMarker = Array("\nPACKAGER-REQUEST\n".utf8)

/// The fuzzed request's method, target and headers, from the text after the marker.
func fuzzedRequest(_ text: [UInt8]) -> (method: String, target: String, headers: [(name: String, value: String)]) {
    let lines = text.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
    func line(_ i: Int) -> String? { i < lines.count ? lines[i] : nil }
    let names = ["Range", "If-None-Match", "If-Modified-Since", "If-Range", "Accept-Encoding"]
    var headers: [(name: String, value: String)] = []
    for (offset, name) in names.enumerated() { if let value = line(offset + 2) { headers.append((name, value)) } }
    return (line(0) ?? "GET", line(1) ?? "", headers)
}

func fuzzBundleReader(_ input: UnsafePointer<UInt8>?, _ inputSize: Int) -> CInt {
    guard let input else { return 0 }
    // Split off the request, if there is one.
    let all = UnsafeBufferPointer(start: input, count: inputSize)
    var size = inputSize
    var request: (method: String, target: String, headers: [(name: String, value: String)])?
    if let at = all.firstRange(of: requestMarker) {
        size = at.lowerBound
        request = fuzzedRequest(Array(all[at.upperBound...]))
    }
    let data = input
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
    // A delta (docs/FORMAT.md §12) is mounted over the vector it was made for, when the fuzzer made one of a seed.
    guard
        let bundle = (try? MountedBundle.mountBlocking(.file(scratchPath), options: options))
            ?? deltaBase.flatMap({ try? MountedBundle.mountBlocking(.delta(.file(scratchPath), over: .mounted($0)), options: options) })
    else { return 0 }
    // The HTTP side too: conditional, range, HEAD and gzip requests answered from what the file holds.
    let responder = BundleResponder(bundle: bundle)
    for entry in bundle.entries.prefix(64) {
        if let request {
            // The target either replaces the URL (an absolute one) or is appended to the entry's key.
            let url = request.target.hasPrefix("http") ? request.target : entry.key + request.target
            for target in [url, entry.key] {
                if let answer = responder.respond(to: BundleRequest(method: request.method, url: target, headers: fields(request.headers))) {
                    _ = try? answer.bodyData()
                }
            }
        }
        for headers in requestVariants {
            _ = try? responder.respond(to: BundleRequest(method: "GET", url: entry.key, headers: fields(headers)))?.bodyData()
        }
        _ = responder.respond(to: BundleRequest(method: "HEAD", url: entry.key + "?utm_source=x#frag"))
    }
    for entry in bundle.entries.prefix(256) {
        let key = entry.key
        _ = bundle.entry(forKey: key)
        _ = bundle.entry(for: key)
        _ = entry.fields
        _ = entry.header("content-type")
        _ = try? bundle.body(of: entry)
        _ = try? bundle.deflatedBody(of: entry)
    }
    return 0
}

var argc = CommandLine.argc
var argv = CommandLine.unsafeArgv
exit(llvmFuzzerRunDriver(&argc, &argv) { data, size in fuzzBundleReader(data, size) })
