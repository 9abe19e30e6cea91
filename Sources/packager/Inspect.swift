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
                switch try Inspector.open(path: path, remote: try remote.options(for: [path])) {
                case .bundle(let view): json ? try printBundleJSON(view) : printBundle(view)
                case .archive(let a): json ? try printJSON(a) : printArchive(a)
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

        /// The table of a bundle's rows, a row at a time: one pass for the columns' widths, one to print.
        private func printBundle(_ view: Inspector.BundleView) {
            let b = view.summary
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
            func cells(_ position: Int) -> [String] {
                let e = view.row(position)
                var key = e.key
                if let target = e.redirectTo { key += " -> " + target }
                return [
                    String(e.status), e.kind.description, e.mediaType ?? "-", e.size.map(String.init) ?? "-",
                    e.storedSize.map(String.init) ?? "-", e.compression?.description ?? "-", key,
                ]
            }
            var table = StreamedTable(header: ["STATUS", "KIND", "TYPE", "SIZE", "STORED", "CODING", "KEY"])
            for i in 0..<view.count { table.measure(cells(i)) }
            table.printHeader()
            for i in 0..<view.count { table.print(cells(i)) }
            table.finish()
            let t = b.totals
            let ratio = t.bodyBytes == 0 ? 100 : Double(t.storedBytes) * 100 / Double(t.bodyBytes)
            print("")
            print(
                "\(t.entries) entries, \(t.bodies) distinct bodies, \(formatBytes(t.bodyBytes)) stored as \(formatBytes(t.storedBytes)) (\(String(format: "%.0f", ratio))%)"
            )
        }

        /// The JSON of ``Inspector/BundleListing``, as ``printJSON(_:)`` writes it, with its rows encoded a few hundred at
        /// a time rather than all held.
        private func printBundleJSON(_ view: Inspector.BundleView) throws {
            let encoder = outputEncoder()
            let whole = Array(try encoder.encode(view.summary))
            // The empty array's brackets: the rows go between them.
            let marker = Array("\"entries\" : [".utf8)
            guard view.count > 0, let at = whole.firstRange(of: marker)?.upperBound, let close = whole[at...].firstIndex(of: UInt8(ascii: "]")) else {
                try printJSON(view.listing())
                return
            }
            var out = StandardOutput()
            out.append(whole[..<at])
            var position = 0
            while position < view.count {
                let batch = (position..<min(position + 256, view.count)).map(view.row)
                // `[\n  {…},\n  {…}\n]`: the elements, each line two spaces deeper, as they stand inside the listing.
                let encoded = Array(try encoder.encode(batch))
                out.append(Array(position == 0 ? "\n".utf8 : ",\n".utf8))
                var lineStart = true
                for byte in encoded.dropFirst(2).dropLast(2) {
                    if lineStart { out.append(Array("  ".utf8)) }
                    out.append(byte)
                    lineStart = byte == UInt8(ascii: "\n")
                }
                position += batch.count
            }
            out.append(Array("\n  ".utf8))
            out.append(whole[close...])
            out.append(UInt8(ascii: "\n"))
            out.flush()
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
            for position in 0..<bundle.entryCount {
                let entry = bundle.entry(at: position)
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

/// Prints `rows` as a table, the first being its header (``StreamedTable``).
func printTable(_ rows: [[String]]) {
    guard let header = rows.first else { return }
    var table = StreamedTable(header: header)
    for row in rows.dropFirst() { table.measure(row) }
    table.printHeader()
    for row in rows.dropFirst() { table.print(row) }
    table.finish()
}
