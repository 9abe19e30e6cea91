import Foundation

extension Array: CanonicalJSON.ByteSink where Element == UInt8 {
    mutating func put(_ byte: UInt8) { append(byte) }
    mutating func put(_ bytes: UnsafeBufferPointer<UInt8>) { append(contentsOf: bytes) }
}

/// The canonical form of a JSON request body (docs/FORMAT.md §5.5), so that a client that sends the same document
/// with its members in another order, or with other whitespace, is matched as the recorded request was: members
/// sorted by the bytes of their names, no insignificant whitespace, numbers as written, strings escaped only where
/// JSON requires. Members and elements an ignore pointer names are left out (a request id, a timestamp).
///
/// This runs for every request under a `match` rule, so the document is read into one flat array of nodes that point
/// into the bytes (no allocation per value), and a string without escapes is copied as it stands: unescaped and
/// written again it would be the same bytes.
package enum CanonicalJSON {
    /// Deeper documents are not canonicalized (matched by their bytes): the parse is recursive.
    static let maxDepth = 256

    /// The canonical bytes of `bytes`, one JSON value (RFC 8259) with optional whitespace around it, without what
    /// `ignoring` names; nil when it is not exactly one JSON value, has a name twice in one object, holds a lone
    /// surrogate escape, or nests deeper than 256.
    ///
    /// - Parameter ignoring: JSON pointers (RFC 6901) as their reference tokens, unescaped; a `*` token stands for
    ///   any one member or element.
    package static func canonical(_ bytes: [UInt8], ignoring: [[String]] = []) -> [UInt8]? {
        canonical(bytes, ignoringTokens: ignoring.map { $0.map { Array($0.utf8) } })
    }

    /// ``canonical(_:ignoring:)`` with the pointers' tokens as bytes (a rule makes them once).
    package static func canonical(_ bytes: [UInt8], ignoringTokens: [[[UInt8]]]) -> [UInt8]? {
        guard var document = Document(bytes) else { return nil }
        for pointer in ignoringTokens { document.remove(pointer[...], at: 0) }
        return document.canonical()
    }

    /// A pointer's reference tokens (`/a/b~1c` → `["a", "b/c"]`); nil when it is not a JSON pointer. The empty pointer
    /// (the whole document) has no tokens.
    package static func tokens(ofPointer pointer: String) -> [String]? {
        if pointer.isEmpty { return [] }
        guard pointer.hasPrefix("/") else { return nil }
        var tokens: [String] = []
        for raw in pointer.dropFirst().split(separator: "/", omittingEmptySubsequences: false) {
            // `~` is escaped as `~0`, `/` as `~1`; any other `~` is an error.
            var token = ""
            var index = raw.startIndex
            while index < raw.endIndex {
                let c = raw[index]
                if c == "~" {
                    let next = raw.index(after: index)
                    guard next < raw.endIndex, raw[next] == "0" || raw[next] == "1" else { return nil }
                    token.append(raw[next] == "0" ? "~" : "/")
                    index = raw.index(after: next)
                } else {
                    token.append(c)
                    index = raw.index(after: index)
                }
            }
            tokens.append(token)
        }
        return tokens
    }

    /// Where two JSON documents differ, in document order (members by name): each place's JSON pointer and the
    /// canonical text of the value on either side (nil where that side has none). Nil when either is not one JSON
    /// value. At most `limit` places are listed.
    package static func differences(_ mine: [UInt8], _ recorded: [UInt8], limit: Int = 50) -> [(pointer: String, mine: String?, recorded: String?)]? {
        // Compared in their canonical forms, where equal values are equal bytes.
        guard let a = canonical(mine).flatMap(Document.init), let b = canonical(recorded).flatMap(Document.init) else { return nil }
        var found: [(pointer: String, mine: String?, recorded: String?)] = []
        difference(a, 0, b, 0, at: "", into: &found, limit: limit)
        return found
    }

    static func difference(
        _ a: Document, _ x: Int?, _ b: Document, _ y: Int?, at pointer: String, into found: inout [(pointer: String, mine: String?, recorded: String?)],
        limit: Int
    ) {
        guard found.count < limit else { return }
        switch (x.map { a.nodes[$0].kind }, y.map { b.nodes[$0].kind }) {
        case (.object?, .object?):
            let m = a.members(of: x!).map { (name: a.unescaped($0), value: $0 + 1) }
            let n = b.members(of: y!).map { (name: b.unescaped($0), value: $0 + 1) }
            let names = Set(m.map(\.name)).union(n.map(\.name)).sorted { $0.lexicographicallyPrecedes($1) }
            for name in names {
                let token = String(decoding: name, as: UTF8.self).replacingOccurrences(of: "~", with: "~0").replacingOccurrences(of: "/", with: "~1")
                difference(
                    a, m.first { $0.name == name }?.value, b, n.first { $0.name == name }?.value, at: pointer + "/" + token, into: &found, limit: limit)
            }
        case (.array?, .array?):
            let m = a.children(of: x!)
            let n = b.children(of: y!)
            for i in 0..<max(m.count, n.count) {
                difference(a, i < m.count ? m[i] : nil, b, i < n.count ? n[i] : nil, at: pointer + "/" + String(i), into: &found, limit: limit)
            }
        default:
            let (mine, recorded) = (x.map { a.text(of: $0) }, y.map { b.text(of: $0) })
            if mine != recorded { found.append((pointer, mine, recorded)) }
        }
    }

    /// `"` + the bytes, with `"` and `\` escaped, LF, CR and TAB as `\n`, `\r`, `\t`, other bytes below 0x20 as
    /// `\u00xx` (lowercase hex), everything else raw (§6.1's STRING).
    static func writeString(_ bytes: [UInt8], to out: inout some ByteSink) {
        bytes.withUnsafeBufferPointer { writeString($0, to: &out) }
    }

    /// The same, over bytes in place: runs of bytes that need no escape are copied whole.
    static func writeString(_ bytes: UnsafeBufferPointer<UInt8>, to out: inout some ByteSink) {
        let quote = UInt8(ascii: "\"")
        let backslash = UInt8(ascii: "\\")
        out.put(quote)
        var run = 0
        for k in 0..<bytes.count {
            let byte = bytes[k]
            guard byte < 0x20 || byte == quote || byte == backslash else { continue }
            if k > run { out.put(UnsafeBufferPointer(rebasing: bytes[run..<k])) }
            out.put(backslash)
            switch byte {
            case quote, backslash: out.put(byte)
            case 0x0A: out.put(UInt8(ascii: "n"))
            case 0x0D: out.put(UInt8(ascii: "r"))
            case 0x09: out.put(UInt8(ascii: "t"))
            default:
                let hex: StaticString = "0123456789abcdef"
                out.put(UInt8(ascii: "u"))
                out.put(UInt8(ascii: "0"))
                out.put(UInt8(ascii: "0"))
                hex.withUTF8Buffer { digits in
                    out.put(digits[Int(byte >> 4)])
                    out.put(digits[Int(byte & 0x0F)])
                }
            }
            run = k + 1
        }
        if run < bytes.count { out.put(UnsafeBufferPointer(rebasing: bytes[run...])) }
        out.put(quote)
    }

    /// The byte a one-letter escape stands for (`\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`), as JSON and GraphQL
    /// strings have them; nil for another letter.
    static func unescapedByte(_ escape: UInt8) -> UInt8? {
        switch escape {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): escape
        case UInt8(ascii: "b"): 0x08
        case UInt8(ascii: "f"): 0x0C
        case UInt8(ascii: "n"): 0x0A
        case UInt8(ascii: "r"): 0x0D
        case UInt8(ascii: "t"): 0x09
        default: nil
        }
    }

    /// Where canonical bytes are written: a growing array, or ``Output``.
    protocol ByteSink {
        mutating func put(_ byte: UInt8)
        mutating func put(_ bytes: UnsafeBufferPointer<UInt8>)
    }

    /// Bytes written into memory sized beforehand for the most a document's canonical form can take: no capacity or
    /// uniqueness check per byte, one bound check.
    struct Output: ByteSink {
        let base: UnsafeMutablePointer<UInt8>
        let capacity: Int
        var count = 0

        @inline(__always) mutating func put(_ byte: UInt8) {
            precondition(count < capacity, "canonical JSON outgrew its bound")
            base[count] = byte
            count += 1
        }

        @inline(__always) mutating func put(_ bytes: UnsafeBufferPointer<UInt8>) {
            guard let source = bytes.baseAddress, !bytes.isEmpty else { return }
            precondition(count + bytes.count <= capacity, "canonical JSON outgrew its bound")
            if bytes.count <= 16 {
                // Names and numbers are short: copied here, not through a call to memmove.
                for k in 0..<bytes.count { base[count + k] = source[k] }
            } else {
                (base + count).update(from: source, count: bytes.count)
            }
            count += bytes.count
        }
    }

    /// One JSON document read into nodes in document order: a container is followed by its children (an object's as
    /// name, value, name, value…), and its `size` counts the nodes of its subtree, so its next sibling is `size` on.
    /// Reading and writing work on the bytes in place (no retain or bounds check per byte).
    package struct Document {
        enum Kind: UInt8 { case object, array, string, scalar, replaced }

        struct Node {
            var kind: Kind
            /// A string with a backslash in it: its value is not its bytes.
            var escaped = false
            /// Left out by an ignore pointer (a member: its name node is marked, and its value goes with it).
            var removed = false
            /// Strings: the bytes between the quotes; scalars: the literal; containers: from the bracket to after its
            /// pair; `replaced`: `start` is the index of its bytes in ``replacements``.
            var start: Int32
            var end: Int32
            var size: Int32 = 1
            var count: Int32 = 0
        }

        let bytes: [UInt8]
        var nodes: [Node] = []
        /// Bytes that stand for a string node's value (a GraphQL query written canonically).
        var replacements: [[UInt8]] = []

        /// Nil when `bytes` is not exactly one JSON value (with whitespace around it), holds a bad escape, a lone
        /// surrogate, bytes that are not UTF-8, or nests deeper than ``maxDepth``. (A name twice in one object is
        /// found when the document is written.)
        package init?(_ bytes: [UInt8]) {
            self.bytes = bytes
            // A node takes at least two bytes of the document (a value and its separator or bracket), but the root.
            let bound = bytes.count / 2 + 2
            var read = false
            var highBytes = false
            nodes = [Node](unsafeUninitializedCapacity: bound) { buffer, count in
                var reader = Reader(base: buffer.baseAddress!, capacity: bound)
                read = bytes.withUnsafeBufferPointer { p -> Bool in
                    var i = 0
                    reader.skipSpace(p, &i)
                    guard reader.value(p, &i, depth: 0) else { return false }
                    reader.skipSpace(p, &i)
                    return i == p.count
                }
                count = reader.count
                highBytes = reader.highBytes
            }
            guard read else { return nil }
            // Strings begin and end at ASCII bytes, and bytes past 0x7F stand only in strings: when the whole is UTF-8,
            // every string's raw bytes are too.
            if highBytes, String(validating: bytes, as: UTF8.self) == nil { return nil }
        }

        /// A string node's value, unescaped (checked when read).
        func unescaped(_ node: Int) -> [UInt8] {
            bytes.withUnsafeBufferPointer { unescaped(node, $0) }
        }

        func unescaped(_ node: Int, _ p: UnsafeBufferPointer<UInt8>) -> [UInt8] {
            let n = nodes[node]
            if n.kind == .replaced { return replacements[Int(n.start)] }
            let raw = UnsafeBufferPointer(rebasing: p[Int(n.start)..<Int(n.end)])
            guard n.escaped else { return Array(raw) }
            var out: [UInt8] = []
            out.reserveCapacity(raw.count)
            var i = 0
            var run = 0
            while i < raw.count {
                guard raw[i] == UInt8(ascii: "\\") else {
                    i += 1
                    continue
                }
                if i > run { out.append(contentsOf: UnsafeBufferPointer(rebasing: raw[run..<i])) }
                let escape = raw[i + 1]
                i += 2
                switch escape {
                case UInt8(ascii: "u"):
                    var scalar = UInt32(Reader.hex4(raw, at: i)!)
                    i += 4
                    if (0xD800...0xDBFF).contains(scalar) {
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (UInt32(Reader.hex4(raw, at: i + 2)!) - 0xDC00)
                        i += 6
                    }
                    var utf8: [UInt8] = []
                    UTF8.encode(Unicode.Scalar(scalar)!) { utf8.append($0) }
                    out.append(contentsOf: utf8)
                default: out.append(CanonicalJSON.unescapedByte(escape) ?? escape)
                }
                run = i
            }
            if run < raw.count { out.append(contentsOf: UnsafeBufferPointer(rebasing: raw[run...])) }
            return out
        }

        /// What JSON value node `node` is (node 0 is the document's).
        package enum ValueKind: Sendable { case object, array, string, number, boolean, null }

        package func kind(of node: Int) -> ValueKind {
            let n = nodes[node]
            switch n.kind {
            case .object: return .object
            case .array: return .array
            case .string, .replaced: return .string
            case .scalar:
                switch bytes[Int(n.start)] {
                case UInt8(ascii: "n"): return .null
                case UInt8(ascii: "t"), UInt8(ascii: "f"): return .boolean
                default: return .number
                }
            }
        }

        /// A string node's value; a number's or a literal's text as written.
        package func string(_ node: Int) -> String {
            let n = nodes[node]
            if n.kind == .scalar || (n.kind == .string && !n.escaped) {
                return bytes.withUnsafeBufferPointer { String(decoding: UnsafeBufferPointer(rebasing: $0[Int(n.start)..<Int(n.end)]), as: UTF8.self) }
            }
            return String(decoding: unescaped(node), as: UTF8.self)
        }

        /// Whether string node `node`'s value is `name`.
        package func value(of node: Int, is name: [UInt8]) -> Bool {
            let n = nodes[node]
            if n.escaped || n.kind == .replaced { return unescaped(node) == name }
            return bytes.withUnsafeBufferPointer { p in UnsafeBufferPointer(rebasing: p[Int(n.start)..<Int(n.end)]).elementsEqual(name) }
        }

        /// An object's member name nodes, the removed ones too (each member's value is the node after its name).
        package func members(of object: Int) -> [Int] {
            var found: [Int] = []
            var j = object + 1
            for _ in 0..<nodes[object].count {
                found.append(j)
                j += 1 + Int(nodes[j + 1].size)
            }
            return found
        }

        /// An array's element nodes.
        package func children(of array: Int) -> [Int] {
            var found: [Int] = []
            var j = array + 1
            for _ in 0..<nodes[array].count {
                found.append(j)
                j += Int(nodes[j].size)
            }
            return found
        }

        /// Marks what `pointer` (reference tokens, `*` for any one) names under node `at` as left out.
        mutating func remove(_ pointer: ArraySlice<[UInt8]>, at node: Int) {
            guard let token = pointer.first else { return }
            let rest = pointer.dropFirst()
            let any = token == [UInt8(ascii: "*")]
            switch nodes[node].kind {
            case .object:
                for name in members(of: node) where !nodes[name].removed && (any || value(of: name, is: token)) {
                    // The last token names what is left out; an earlier one, where to look further.
                    if rest.isEmpty { nodes[name].removed = true } else { remove(rest, at: name + 1) }
                }
            case .array:
                for (index, element) in children(of: node).enumerated() where !nodes[element].removed && (any || token.elementsEqual(String(index).utf8)) {
                    if rest.isEmpty { nodes[element].removed = true } else { remove(rest, at: element) }
                }
            default:
                return
            }
        }

        /// The canonical bytes; nil when an object has a name twice (which one counts is up to the server, so the
        /// document has no one canonical form).
        package func canonical() -> [UInt8]? {
            // The most it can take: a two-byte escape (`\b`) becomes six (`\u0008`); whitespace only goes; a replaced
            // string takes at most six bytes a byte (`\u00xx`) and its quotes.
            let bound = 3 * bytes.count + replacements.reduce(0) { $0 + 6 * $1.count + 2 } + 16
            var written = true
            let out = [UInt8](unsafeUninitializedCapacity: bound) { buffer, count in
                var output = Output(base: buffer.baseAddress!, capacity: bound)
                // An object's members are listed here while it is written (the nested ones' above them): at most one
                // slot per node.
                written = withUnsafeTemporaryAllocation(of: Int32.self, capacity: nodes.count + 1) { scratch in
                    var top = 0
                    return bytes.withUnsafeBufferPointer { p in
                        nodes.withUnsafeBufferPointer { nodes in write(0, p, nodes, to: &output, scratch: scratch, top: &top) }
                    }
                }
                count = output.count
            }
            return written ? out : nil
        }

        /// The canonical text of node `node` (of a document read from canonical bytes: its bytes as they stand).
        func text(of node: Int) -> String {
            let n = nodes[node]
            switch n.kind {
            case .string, .replaced:
                var out: [UInt8] = []
                CanonicalJSON.writeString(unescaped(node), to: &out)
                return String(decoding: out, as: UTF8.self)
            default:
                return String(decoding: bytes[Int(n.start)..<Int(n.end)], as: UTF8.self)
            }
        }

        func write(
            _ node: Int, _ p: UnsafeBufferPointer<UInt8>, _ nodes: UnsafeBufferPointer<Node>, to out: inout Output,
            scratch: UnsafeMutableBufferPointer<Int32>, top: inout Int
        ) -> Bool {
            let n = nodes[node]
            switch n.kind {
            case .object:
                out.put(UInt8(ascii: "{"))
                let base = top
                var j = node + 1
                var escapedNames = false
                for _ in 0..<n.count {
                    if !nodes[j].removed {
                        scratch[top] = Int32(j)
                        top += 1
                    }
                    escapedNames = escapedNames || nodes[j].escaped
                    j += 1 + Int(nodes[j + 1].size)
                }
                let end = top
                guard sortMembers(UnsafeMutableBufferPointer(rebasing: scratch[base..<end]), escaped: escapedNames, p, nodes) else { return false }
                for s in base..<end {
                    let name = Int(scratch[s])
                    if s > base { out.put(UInt8(ascii: ",")) }
                    writeString(name, p, nodes, to: &out)
                    out.put(UInt8(ascii: ":"))
                    guard write(name + 1, p, nodes, to: &out, scratch: scratch, top: &top) else { return false }
                }
                top = base
                out.put(UInt8(ascii: "}"))
            case .array:
                out.put(UInt8(ascii: "["))
                var j = node + 1
                var first = true
                for _ in 0..<n.count {
                    if !nodes[j].removed {
                        if !first { out.put(UInt8(ascii: ",")) }
                        first = false
                        guard write(j, p, nodes, to: &out, scratch: scratch, top: &top) else { return false }
                    }
                    j += Int(nodes[j].size)
                }
                out.put(UInt8(ascii: "]"))
            case .string, .replaced:
                writeString(node, p, nodes, to: &out)
            case .scalar:
                out.put(UnsafeBufferPointer(rebasing: p[Int(n.start)..<Int(n.end)]))
            }
            return true
        }

        /// A string node written canonically: without escapes its bytes are already the canonical form (JSON allows
        /// no raw `"`, `\` or control byte in a string).
        func writeString(_ node: Int, _ p: UnsafeBufferPointer<UInt8>, _ nodes: UnsafeBufferPointer<Node>, to out: inout Output) {
            let n = nodes[node]
            if n.kind == .string, !n.escaped {
                out.put(UInt8(ascii: "\""))
                out.put(UnsafeBufferPointer(rebasing: p[Int(n.start)..<Int(n.end)]))
                out.put(UInt8(ascii: "\""))
            } else {
                CanonicalJSON.writeString(unescaped(node, p), to: &out)
            }
        }

        /// Sorts an object's member name nodes `members` by the bytes of their values; false when two are equal.
        /// Clients often send members in order already: that is checked first.
        func sortMembers(
            _ members: UnsafeMutableBufferPointer<Int32>, escaped: Bool, _ p: UnsafeBufferPointer<UInt8>, _ nodes: UnsafeBufferPointer<Node>
        ) -> Bool {
            guard members.count > 1 else { return true }
            if escaped {
                // Rare: compare unescaped values, each unescaped once.
                var keyed = members.map { (name: unescaped(Int($0), p), node: $0) }
                keyed.sort { $0.name.lexicographicallyPrecedes($1.name) }
                for k in 1..<keyed.count where keyed[k - 1].name == keyed[k].name { return false }
                for (k, item) in keyed.enumerated() { members[k] = item.node }
                return true
            }
            /// -1, 0 or 1 as name node `a`'s bytes sort before, with or after `b`'s. Names are short: compared here
            /// byte by byte, not through a call to memcmp.
            func order(_ a: Int32, _ b: Int32) -> Int {
                let x = nodes[Int(a)]
                let y = nodes[Int(b)]
                let (xCount, yCount) = (Int(x.end - x.start), Int(y.end - y.start))
                let (xBytes, yBytes) = (p.baseAddress! + Int(x.start), p.baseAddress! + Int(y.start))
                let common = min(xCount, yCount)
                if common > 32 {
                    let c = memcmp(xBytes, yBytes, common)
                    if c != 0 { return c < 0 ? -1 : 1 }
                } else {
                    for k in 0..<common where xBytes[k] != yBytes[k] { return xBytes[k] < yBytes[k] ? -1 : 1 }
                }
                return xCount == yCount ? 0 : xCount < yCount ? -1 : 1
            }
            var sorted = true
            for k in 1..<members.count where order(members[k - 1], members[k]) >= 0 {
                sorted = false
                break
            }
            guard !sorted else { return true }
            if members.count <= 16 {
                // Insertion sort: objects are small, and this needs no closure or allocation.
                for k in 1..<members.count {
                    let item = members[k]
                    var j = k
                    while j > 0, order(members[j - 1], item) > 0 {
                        members[j] = members[j - 1]
                        j -= 1
                    }
                    members[j] = item
                }
            } else {
                var all = members
                all.sort { order($0, $1) < 0 }
            }
            for k in 1..<members.count where order(members[k - 1], members[k]) == 0 { return false }
            return true
        }
    }
}
