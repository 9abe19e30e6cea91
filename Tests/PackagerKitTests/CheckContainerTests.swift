import Foundation
import OfflineBundle
import TestSupport
import Testing

@testable import PackagerKit

/// `packager check`'s container pass: the central directory's body records against the index's, in bounded memory
/// (sorted by offset in runs, names seen in a digest table), whatever lies in them.
@Suite("check: the container's records against the index")
struct CheckContainerTests {
    /// A bundle of `count` pages with distinct bodies, and where each body's central record lies.
    static func bundle(_ path: String, count: Int) throws -> (file: [UInt8], bodies: [Int]) {
        var writer = BundleWriter(options: .init(createdAt: Date(timeIntervalSince1970: 1_767_323_045), timeClamp: nil))
        for i in 0..<count {
            writer.add(
                .init(url: "https://docs.example/p\(i).html", status: 200, headers: [("content-type", "text/html")], body: .data(Data("<p>\(i)</p>".utf8))))
        }
        try writer.write(to: path)
        let file = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        func u16(_ at: Int) -> Int { Int(file[at]) | Int(file[at + 1]) << 8 }
        func u32(_ at: Int) -> Int { u16(at) | u16(at + 2) << 16 }
        let end = try #require((0...(file.count - 22)).reversed().first { u32($0) == 0x0605_4B50 })
        var at = u32(end + 16)
        var bodies: [Int] = []
        for _ in 0..<u16(end + 10) {
            if file[(at + 46)..<(at + 48)].elementsEqual(Array("b/".utf8)) { bodies.append(at) }
            at += 46 + u16(at + 28) + u16(at + 30) + u16(at + 32)
        }
        return (file, bodies)
    }

    static func issues(_ file: [UInt8], _ path: String, tableMemoryLimit: Int = 2 << 20) throws -> [String] {
        try Data(file).write(to: URL(fileURLWithPath: path))
        let report = Checker.check(path: path, bases: [], publicKey: nil, remote: nil, tableMemoryLimit: tableMemoryLimit)
        return report.issues.map { "\($0.entry ?? "-"): \($0.message)" }
    }

    static func name(_ file: [UInt8], at record: Int) -> String {
        let length = Int(file[record + 28]) | Int(file[record + 29]) << 8
        return String(decoding: file[(record + 46)..<(record + 46 + length)], as: UTF8.self)
    }

    @Test("a central record's CRC-32, offset or name changed: check names the body, and a clean bundle has no issue")
    func forgedRecords() throws {
        let folder = try TemporaryFolder()
        let path = folder.path + "/b.zip"
        let (file, bodies) = try Self.bundle(path, count: 300)
        #expect(bodies.count == 300)
        #expect(try Self.issues(file, path).isEmpty)
        let (a, b) = (bodies[40], bodies[200])
        let (nameA, nameB) = (Self.name(file, at: a), Self.name(file, at: b))

        // The central CRC-32 of one body: it disagrees with the index and with its local header.
        var crc = file
        crc[a + 16] ^= 0xFF
        let crcIssues = try Self.issues(crc, path)
        #expect(crcIssues.contains { $0.hasSuffix("the index and the central directory disagree about this body") })
        #expect(crcIssues.contains("\(nameA): local and central CRC-32 differ"))

        // One body's record points at another's local header: the first is listed by the index only, the second twice.
        var moved = file
        moved.replaceSubrange((a + 42)..<(a + 46), with: file[(b + 42)..<(b + 46)])
        let movedIssues = try Self.issues(moved, path)
        #expect(movedIssues.contains { $0.hasSuffix("the index lists this body but the central directory does not") }, "\(movedIssues)")
        #expect(movedIssues.contains { $0.hasSuffix("stored in the ZIP but not listed in the index") }, "\(movedIssues)")
        #expect(movedIssues.contains { $0.contains("overlaps") }, "\(movedIssues)")

        // One body's central name is another's: listed twice, and not its digest.
        var renamed = file
        renamed.replaceSubrange((a + 46)..<(a + 46 + nameA.utf8.count), with: Array(nameB.utf8))
        let renamedIssues = try Self.issues(renamed, path)
        #expect(renamedIssues.contains("\(nameB): listed twice in the central directory"), "\(renamedIssues)")
        #expect(
            renamedIssues.contains { $0.hasPrefix("\(nameB): the central directory names this body \(nameB), which is not its digest") }, "\(renamedIssues)")
    }

    @Test("the container pass in runs: 3,000 bodies through sorters and a digest table past their memory, the same verdicts")
    func manyBodies() throws {
        let folder = try TemporaryFolder()
        let path = folder.path + "/b.zip"
        let (file, bodies) = try Self.bundle(path, count: 3000)
        // 512 bytes a table: hundreds of runs, merged in more than one pass, and the names' table in a file.
        #expect(try Self.issues(file, path, tableMemoryLimit: 512).isEmpty)
        var moved = file
        let (a, b) = (bodies[10], bodies[2900])
        moved.replaceSubrange((a + 42)..<(a + 46), with: file[(b + 42)..<(b + 46)])
        #expect(try Self.issues(moved, path, tableMemoryLimit: 512) == Self.issues(moved, path))
        let issues = try Self.issues(moved, path, tableMemoryLimit: 512)
        #expect(issues.filter { $0.hasSuffix("the index lists this body but the central directory does not") }.count == 1, "\(issues)")
        #expect(issues.filter { $0.hasSuffix("stored in the ZIP but not listed in the index") }.count == 1, "\(issues)")
    }

    @Test(
        "a scratch folder that cannot be written: the index is held in memory and the bundle checked; a container pass that cannot spill says NOT CHECKED, not 3,000 false issues"
    )
    func scratchFails() throws {
        let folder = try TemporaryFolder()
        let path = folder.path + "/b.zip"
        let (file, _) = try Self.bundle(path, count: 3000)
        let missing = folder.path + "/missing"
        // Every index goes to the scratch folder, and no table spills: the mount falls back to memory, check passes.
        let mounted = Checker.check(
            path: path, bases: [], publicKey: nil, remote: nil, tableMemoryLimit: 2 << 20, scratchFolder: missing, indexScratchAbove: 0)
        #expect(mounted.issues.isEmpty && !mounted.refusedInput, "\(mounted.issues)")
        #expect(mounted.entries == 3000)
        // The container's tables spill past 512 bytes into a folder that is not there.
        let spilled = Checker.check(path: path, bases: [], publicKey: nil, remote: nil, tableMemoryLimit: 512, scratchFolder: missing)
        #expect(spilled.refusedInput)
        #expect(spilled.issues.count == 1, "\(spilled.issues.prefix(3))")
        #expect(spilled.issues.first?.message.contains(missing) == true, "\(spilled.issues.prefix(3))")
        _ = file
    }
}
