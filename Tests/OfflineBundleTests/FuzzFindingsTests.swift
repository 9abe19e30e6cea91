import Foundation
import OfflineBundle
import TestSupport
import Testing

/// Every input scripts/fuzz.sh found (crashes, hangs, over-allocations), kept in Tests/Fuzz/findings and
/// replayed as the fuzzer ran it: each must now be refused with a ``BundleError`` (or read cleanly), never crash.
@Suite("fuzzer findings")
struct FuzzFindingsTests {
    static let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fuzz/findings").path

    static var findings: [String] { ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).sorted() }

    @Test("the findings folder holds the inputs found so far")
    func kept() {
        #expect(Self.findings.contains("crash-zip64-end-record-near-start"))
        // The Range that crashed every integration (issue 12), as the fuzzer's request seeds write it.
        #expect(Self.findings.contains("crash-range-end-uint64-max") && Self.findings.contains("crash-range-suffix-past-uint64"))
    }

    @Test("a finding is refused with a BundleError, or read and answered, as the fuzzer's harness reads it", arguments: findings)
    func replay(_ name: String) throws {
        // An input is a bundle, optionally followed by a request (see Tests/Fuzz's harness).
        var bytes = try Data(contentsOf: URL(fileURLWithPath: Self.folder + "/" + name))
        var requestLines: [String]?
        if let marker = bytes.range(of: Data("\nPACKAGER-REQUEST\n".utf8)) {
            requestLines = String(decoding: bytes[marker.upperBound...], as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false).map(
                String.init)
            bytes = bytes[..<marker.lowerBound]
        }
        let folder = try TemporaryFolder()
        try bytes.write(to: URL(fileURLWithPath: folder.path + "/finding.zip"))
        let options = MountedBundle.Options(verification: .sha256, maxBodySize: 16 << 20)
        let bundle: MountedBundle
        do {
            bundle = try MountedBundle(path: folder.path + "/finding.zip", options: options)
        } catch let error as BundleError {
            #expect(error.code != .io, "\(error)")
            return
        }
        if let lines = requestLines {
            let names = ["Range", "If-None-Match", "If-Modified-Since", "If-Range", "Accept-Encoding"]
            let headers = names.enumerated().compactMap { i, name in i + 2 < lines.count ? (name: name, value: lines[i + 2]) : nil }
            let method = lines.first ?? "GET"
            let target = lines.count > 1 ? lines[1] : ""
            for entry in bundle.entries.prefix(64) {
                let url = target.hasPrefix("http") ? target : entry.key + target
                if let answer = BundleResponder(bundle: bundle).respond(
                    to: BundleRequest(method: method, url: url, headers: fields(headers.map { ($0.name, $0.value) })))
                {
                    #expect((100...599).contains(answer.status))
                    do { _ = try answer.bodyData() } catch is BundleError {}
                }
            }
        }
        for entry in bundle.entries.prefix(256) {
            #expect(bundle.entry(forKey: entry.key)?.position == entry.position)
            do { _ = try bundle.body(of: entry) } catch is BundleError {}
            do { _ = try bundle.deflatedBody(of: entry) } catch is BundleError {}
        }
    }

    @Test("an end record that asks for ZIP64 too close to the start of the file is refused, not an arithmetic overflow")
    func zip64EndRecordNearStart() throws {
        #expect(throws: BundleError.self) { try MountedBundle(path: Self.folder + "/crash-zip64-end-record-near-start") }
    }
}
