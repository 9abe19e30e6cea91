import Foundation
import OfflineBundle
import PackagerKit
import TestSupport
import Testing

@Suite("packager inspect --expired")
struct ExpiredTests {
    @Test("lists exactly the entries whose origin-given lifetime has passed, with lifetime and age")
    func listsExpired() async throws {
        let folder = try TemporaryFolder()
        let hourAgo = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 - 3600).rounded(.down))
        var writer = BundleWriter()
        let origin = "https://docs.example.com"
        writer.add(.init(url: origin + "/short", headers: [("cache-control", "max-age=60")], body: .data(Data("a".utf8)), fetchedAt: hourAgo))
        writer.add(.init(url: origin + "/long", headers: [("cache-control", "public, max-age=86400")], body: .data(Data("b".utf8)), fetchedAt: hourAgo))
        writer.add(
            .init(
                url: origin + "/expires", headers: [("expires", HTTPDates.format(hourAgo.addingTimeInterval(600))), ("date", HTTPDates.format(hourAgo))],
                body: .data(Data("c".utf8)), fetchedAt: hourAgo, originDate: hourAgo))
        writer.add(.init(url: origin + "/silent", headers: [], body: .data(Data("d".utf8)), fetchedAt: hourAgo))
        try writer.write(to: folder.path + "/b.zip")
        let result = try await run(packagerExecutable, ["inspect", "--expired", "--json", folder.path + "/b.zip"])
        #expect(result.status == 0, "\(result.output)")
        struct Row: Decodable {
            var key: String
            var lifetimeSeconds: Int
            var ageSeconds: Int
        }
        let rows = try JSONDecoder().decode([Row].self, from: Data(result.output.utf8))
        #expect(rows.map(\.key).sorted() == [origin + "/expires", origin + "/short"])
        #expect(rows.first { $0.key.hasSuffix("/short") }?.lifetimeSeconds == 60)
        #expect(rows.first { $0.key.hasSuffix("/expires") }?.lifetimeSeconds == 600)
        #expect(rows.allSatisfy { $0.ageSeconds >= 3600 && $0.ageSeconds < 3700 })
    }
}
