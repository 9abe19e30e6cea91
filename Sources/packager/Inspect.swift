import ArgumentParser
import Foundation
import OfflineBundle
import PackagerKit

extension Packager {
    struct Inspect: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "inspect",
            abstract: "List a bundle's entries (or any archive's files) with sizes, media types and compression.",
            discussion: exitStatusHelp
        )

        @Argument(help: "The bundle or archive to list; a bundle may be an http(s) URL, read by range requests.")
        var path: String

        @OptionGroup(title: "Bundle URLs") var remote: RemoteFlags

        @Flag(help: "Print JSON instead of a table.")
        var json = false

        @Flag(help: "List only the entries whose freshness lifetime has passed (Cache-Control max-age, 0 for no-cache or no-store, or Expires).")
        var expired = false

        func run() throws {
            try reportingErrors {
                // A delta is described by itself, without its base.
                if let delta = try deltaInfo() {
                    try printDelta(delta)
                    return
                }
                if expired {
                    try printExpired()
                    return
                }
                let listing = try Inspector.inspect(path: path, remote: try remote.options(for: [path]))
                if json {
                    switch listing {
                    case .bundle(let b): try printJSON(b)
                    case .archive(let a): try printJSON(a)
                    }
                    return
                }
                switch listing {
                case .bundle(let b): printBundle(b)
                case .archive(let a): printArchive(a)
                }
            }
        }

        /// What the file at `path` says of itself as a delta; nil when it is not one.
        private func deltaInfo() throws -> DeltaInfo? {
            guard !RemoteOptions.isRemote(path), FileManager.default.fileExists(atPath: path) else { return nil }
            do {
                return try MountedBundle.deltaInfo(atPath: path)
            } catch let error as BundleError where error.code == .notABundle || error.code == .truncated {
                return nil  // not a ZIP file with end records: Inspector says what it is
            } catch let error as BundleError {
                throw PackagerError(.invalidInput, error.message, subject: path)
            }
        }

        private func printDelta(_ delta: DeltaInfo) throws {
            if json {
                try printJSON(delta)
                return
            }
            let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.uint64Value ?? 0
            print(
                "delta \(path)  (\(formatBytes(size)), \(String(format: "%.2f", Double(size) * 100 / Double(max(delta.target.size, 1)))) % of the bundle it stands for)"
            )
            print("stands for the bundle sha256:\(delta.target.digest) (\(formatBytes(delta.target.size)), file sha256:\(delta.target.sha256))")
            print("mounts over the bundle sha256:\(delta.base)")
            print("bodies: \(delta.carried) carried, \(delta.patched) as patches of the base's, \(delta.reused) read from the base")
            print("keys: \(delta.added) added, \(delta.changed) changed, \(delta.removed.count) removed")
            for key in delta.removed.prefix(20) { print("  removed \(terminalSafe(key))") }
            if delta.removed.count > 20 { print("  … and \(delta.removed.count - 20) more (--json lists them all)") }
            // The keys added and changed are known against the base only.
            if delta.added + delta.changed > 0 { print("  (packager diff BASE \(path) names every key added, changed and removed)") }
        }

        private func printBundle(_ b: Inspector.BundleListing) {
            print(
                "bundle \(b.path)  (\(formatBytes(b.fileSize)), \(b.signed ? "signed, not verified here: packager check --public-key" : "unsigned"), \(terminalSafe(b.generator)))"
            )
            print("format version \(b.formatVersion), digest sha256:\(b.digest)")
            if let createdAt = b.createdAt { print("created \(terminalSafe(createdAt))") }
            let rules = [
                ("drops query parameters", b.rules.dropQueryParameters), ("blocks", b.rules.block), ("substitutes", b.rules.substitutions),
                ("substitutes under", b.rules.substitutionPrefixes), ("ignores the query under", b.rules.ignoreQuery),
            ]
            for (label, values) in rules where !values.isEmpty { print("\(label): \(terminalSafe(values.joined(separator: ", ")))") }
            print("")
            let header = ["STATUS", "KIND", "TYPE", "SIZE", "STORED", "CODING", "KEY"]
            var rows = [header]
            for e in b.entries {
                var key = e.key
                if let target = e.redirectTo { key += " -> " + target }
                rows.append([
                    String(e.status), e.kind.description, e.mediaType ?? "-", e.size.map(String.init) ?? "-",
                    e.storedSize.map(String.init) ?? "-", e.compression?.description ?? "-", key,
                ])
            }
            printTable(rows)
            let t = b.totals
            let ratio = t.bodyBytes == 0 ? 100 : Double(t.storedBytes) * 100 / Double(t.bodyBytes)
            print("")
            print(
                "\(t.entries) entries, \(t.bodies) distinct bodies, \(formatBytes(t.bodyBytes)) stored as \(formatBytes(t.storedBytes)) (\(String(format: "%.0f", ratio))%)"
            )
        }

        /// An entry past its lifetime: how long it was fresh for, and its age now.
        struct ExpiredRow: Codable {
            var key: String
            var lifetimeSeconds: Int
            var ageSeconds: Int
            var fetchedAt: String?
        }

        private func printExpired() throws {
            let bundle: MountedBundle
            do {
                bundle = try MountedBundle(location: path, remote: try remote.options(for: [path]))
            } catch let error as BundleError {
                throw PackagerError(.invalidInput, error.message)
            }
            let now = Date()
            var rows: [ExpiredRow] = []
            for entry in bundle.entries {
                guard let lifetime = entry.freshnessLifetime, let age = entry.age(at: now), age > lifetime else { continue }
                rows.append(
                    ExpiredRow(
                        key: entry.key, lifetimeSeconds: Int(lifetime.components.seconds), ageSeconds: Int(age.components.seconds),
                        fetchedAt: entry.fetchedAt.map(HTTPDates.format)))
            }
            if json {
                try printJSON(rows)
                return
            }
            var table = [["LIFETIME", "AGE", "FETCHED", "KEY"]]
            for row in rows {
                table.append([formatSeconds(row.lifetimeSeconds), formatSeconds(row.ageSeconds), row.fetchedAt ?? "-", row.key])
            }
            printTable(table)
            print("")
            print("\(rows.count) of \(bundle.entryCount) entries are past the lifetime their origin gave them")
        }

        private func formatSeconds(_ seconds: Int) -> String {
            if seconds < 120 { return "\(seconds)s" }
            if seconds < 7200 { return "\(seconds / 60)m" }
            if seconds < 172_800 { return "\(seconds / 3600)h" }
            return "\(seconds / 86400)d"
        }

        private func printArchive(_ a: Inspector.ArchiveListing) {
            print("archive \(a.path)  (\(terminalSafe(a.format)), \(terminalSafe(a.filter))); not a packager bundle")
            print("")
            var rows = [["SIZE", "TYPE", "PATH"]]
            for e in a.entries { rows.append([String(e.size), e.type, e.path]) }
            printTable(rows)
            print("")
            print("\(a.entries.count) entries, \(formatBytes(UInt64(a.totalSize)))")
        }
    }
}

func printTable(_ rows: [[String]]) {
    let rows = rows.map { $0.map(terminalSafe) }
    guard let columns = rows.first?.count else { return }
    var widths = [Int](repeating: 0, count: columns)
    for row in rows { for (i, cell) in row.enumerated() where i < columns - 1 { widths[i] = max(widths[i], cell.count) } }
    for row in rows {
        var line = ""
        for (i, cell) in row.enumerated() {
            line += i == columns - 1 ? cell : cell.padding(toLength: widths[i], withPad: " ", startingAt: 0) + "  "
        }
        print(line)
    }
}
