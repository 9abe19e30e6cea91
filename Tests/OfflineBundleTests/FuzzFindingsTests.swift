import Foundation
import OfflineBundle
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
    }

    @Test("a finding is refused with a BundleError, as the fuzzer's harness reads it", arguments: findings)
    func replay(_ name: String) throws {
        let options = MountedBundle.Options(verification: .sha256, maxBodySize: 16 << 20)
        let bundle: MountedBundle
        do {
            bundle = try MountedBundle(path: Self.folder + "/" + name, options: options)
        } catch let error as BundleError {
            #expect(!error.description.isEmpty)
            return
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
