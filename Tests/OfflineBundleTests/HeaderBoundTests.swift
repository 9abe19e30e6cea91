import Foundation
import OfflineBundle
import PackagerKit
import TestSupport
import Testing

/// The third security review's S7: an entry with 65,535 stored header lines trapped the server on its first request. A
/// header block is bounded by the format (128 KiB, FORMAT §4.5): the writer refuses more, and a reader refuses an
/// index that holds more, as hostile, at mount.
@Suite("Header blocks past the format's bound: refused by the writer and at mount, never a trap")
struct HeaderBoundTests {
    let origin = "https://docs.example.com"

    @Test("the writer refuses an entry whose headers take more than 128 KiB, naming it; at the bound it writes and answers")
    func writerRefusesAnOversizedBlock() throws {
        let folder = try TemporaryFolder()
        // 65,600 `link: <a>` lines, as the review's HAR made: 720 KiB.
        var writer = BundleWriter()
        writer.add(.init(url: origin + "/crash", headers: Array(repeating: ("link", "<a>"), count: 65_600), body: .data(Data("x".utf8))))
        let error = try #require(throws: BundleError.self) { try writer.write(to: folder.path + "/big.zip") }
        #expect(error.code == .invalidArgument && error.message.contains("131072"), "\(error)")
        #expect(!FileManager.default.fileExists(atPath: folder.path + "/big.zip"), "no bundle is left at the output path")
        // Just under the bound (`link: <a>` + LF is 10 bytes): written, mounted, and every line answered.
        var fits = BundleWriter()
        let lines = BundleFormat.maxHeaderBlockBytes / 10
        fits.add(.init(url: origin + "/many", headers: Array(repeating: ("link", "<a>"), count: lines), body: .data(Data("x".utf8))))
        try fits.write(to: folder.path + "/fits.zip")
        let response = try #require(try OfflineLoader(path: folder.path + "/fits.zip").response(for: BundleRequest(url: origin + "/many")))
        #expect(response.headers[values: .init("link")!].count == lines)
    }

    @Test("an index whose header block is past the bound is refused at mount as hostile (two blocks forged into one)")
    func mountRefusesAnOversizedBlock() throws {
        let folder = try TemporaryFolder()
        let path = folder.path + "/forged.zip"
        // Two entries with 100 KiB blocks each, under the bound; then block 0's end is moved to block 1's: 200 KiB.
        var writer = BundleWriter()
        for name in ["a", "b"] {
            writer.add(.init(url: origin + "/" + name, headers: Array(repeating: ("link", "<\(name)>"), count: 10_240), body: .data(Data(name.utf8))))
        }
        try writer.write(to: path)
        #expect(throws: Never.self) { try MountedBundle(path: path) }
        try forgeMetadataEntry("index.bin", in: path) { bytes in
            func u32(_ at: Int) -> Int { (0..<4).reduce(0) { $0 | Int(bytes[at + $1]) << (8 * $1) } }
            let blockCount = u32(28)
            let table = (0..<8).reduce(0) { $0 | Int(bytes[56 + $1]) << (8 * $1) }
            precondition(blockCount == 2)
            // Entry b names block 1; block 0 now reaches to the end of block 1 (block 1 is left empty).
            let end = u32(table + 8)
            for i in 0..<4 { bytes[table + 4 + i] = UInt8(truncatingIfNeeded: end >> (8 * i)) }
        }
        let error = try #require(throws: BundleError.self) { try MountedBundle(path: path) }
        #expect(error.code == .hostile && error.message.contains("header block 0"), "\(error)")
    }
}
