import Foundation

/// Queries and paths (docs/FORMAT.md §4.6, H2): answering a query no entry holds where the origin ignores it, and the
/// table of paths a miss is explained against (``MissExplanation``). Both are made on first use, not at mount.
extension MountedBundle {
    /// The entry that answers `url` with its query ignored, under the bundle's ignore-query rules (docs/FORMAT.md §4.6):
    /// the entry of the key without its query, when that key matches an ignore-query pattern and every entry the bundle
    /// records for the same path with a query answers as that entry does (its status and body). Nil otherwise, and for
    /// a URL without a query.
    public func entryIgnoringQuery(for url: String) -> BundleEntry? { entryIgnoringQuery(for: BundleRequest(url: url)) }

    /// ``entryIgnoringQuery(for:)-(String)`` for a whole request: in a bundle with request variants, the query-less URL
    /// is matched by H19 (its method, headers and body), not taken as a plain GET.
    public func entryIgnoringQuery(for request: BundleRequest) -> BundleEntry? {
        let url = request.url
        guard !index.rules.ignoreQuery.isEmpty, let key = canonicalizer.canonicalize(url), let mark = key.firstIndex(of: "?") else { return nil }
        let path = String(key[..<mark])
        guard index.rules.ignoreQueryPattern(matching: path) != nil else { return nil }
        let querySpecific = queryVariantPaths.withLock { paths in
            if paths == nil { paths = queryVariants() }
            return paths![path] ?? false
        }
        guard !querySpecific else { return nil }
        guard variantTable != nil else { return entry(forKey: path) }
        var queryless = request
        queryless.url = path
        return entry(for: queryless)
    }

    /// The entries whose URL, without its query, is `path` (canonical), in key order.
    func entriesUnderPath(_ path: String) -> [Int] { withPathTable { $0.byPath[path] ?? [] } }

    /// The recorded path in the same folder as `path` that is nearest to it by edit distance (a typo: `faq.htm` for
    /// `faq.html`), at most 2 edits away; nil when none is. At most 512 paths of the folder are compared.
    func similarPath(to path: String) -> String? {
        guard let slash = path.lastIndex(of: "/") else { return nil }
        let name = Array(path[path.index(after: slash)...].utf8)
        return withPathTable { table in
            var best: (path: String, distance: Int)?
            for candidate in (table.byFolder[path[...slash]] ?? []).prefix(512) {
                let other = Array(candidate.utf8.dropFirst(path.utf8.distance(from: path.utf8.startIndex, to: slash) + 1))
                guard abs(other.count - name.count) <= 2, let distance = Self.editDistance(name, other, limit: 2) else { continue }
                if best == nil || distance < best!.distance { best = (candidate, distance) }
            }
            return best?.path
        }
    }

    /// The Levenshtein distance between `a` and `b`, or nil when it is over `limit`.
    static func editDistance(_ a: [UInt8], _ b: [UInt8], limit: Int) -> Int? {
        var previous = Array(0...b.count)
        for (i, x) in a.enumerated() {
            var current = [i + 1] + Array(repeating: 0, count: b.count)
            for (j, y) in b.enumerated() {
                current[j + 1] = Swift.min(previous[j + 1] + 1, current[j] + 1, previous[j] + (x == y ? 0 : 1))
            }
            guard current.min()! <= limit else { return nil }
            previous = current
        }
        return previous[b.count] <= limit ? previous[b.count] : nil
    }

    func withPathTable<T>(_ body: ((byPath: [String: [Int]], byFolder: [Substring: [String]])) -> T) -> T {
        pathTable.withLock { table in
            if table == nil {
                var byPath: [String: [Int]] = [:]
                for i in 0..<index.entryCount {
                    let key = index.entryKey(i)
                    let url = key.utf8.firstIndex(of: UInt8(ascii: " ")).map { key[..<$0] } ?? key[...]
                    let path = url.utf8.firstIndex(of: UInt8(ascii: "?")).map { url[..<$0] } ?? url
                    byPath[String(path), default: []].append(i)
                }
                var byFolder: [Substring: [String]] = [:]
                for path in byPath.keys.sorted() {
                    guard let slash = path.lastIndex(of: "/") else { continue }
                    byFolder[path[...slash], default: []].append(path)
                }
                table = (byPath, byFolder)
            }
            return body(table!)
        }
    }

    /// For each query-less URL some entry was recorded at with a query: whether the query matters there (H2). It does
    /// not when every recorded version answers as the query-less entry does, with its status and its body (bodies are
    /// stored once, so the same body is the same body record): the origin ignored the queries it was asked.
    func queryVariants() -> [String: Bool] {
        var answers: [String: [(status: UInt16, body: Int?)]] = [:]
        for i in 0..<index.entryCount {
            let key = index.entryKey(i)
            // The URL of a key with request qualifiers ends at its first space; a qualifier may hold a `?`.
            let url = key.utf8.firstIndex(of: UInt8(ascii: " ")).map { key[..<$0] } ?? key[...]
            guard let mark = url.utf8.firstIndex(of: UInt8(ascii: "?")) else { continue }
            let fields = index.entryFields(i)
            answers[String(url[..<mark]), default: []].append((fields.status, fields.body))
        }
        return answers.reduce(into: [:]) { specific, item in
            let plain = item.key.utf8CString.withUnsafeBytes { raw in
                index.find(canonicalKey: UnsafeRawBufferPointer(rebasing: raw.dropLast())).map(index.entryFields)
            }
            guard let plain else {
                specific[item.key] = true
                return
            }
            specific[item.key] = item.value.contains { $0.status != plain.status || $0.body != plain.body }
        }
    }
}
