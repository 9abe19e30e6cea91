/// The canonical form of an `application/x-www-form-urlencoded` request body (docs/FORMAT.md §5.5): its parameters
/// decoded (`+` is a space), the ignored names left out, sorted by name (the values of one name in their order), and
/// encoded again one way.
package enum CanonicalForm {
    /// The canonical bytes of `bytes`; nil when a `%` is not followed by two hexadecimal digits.
    package static func canonical(_ bytes: [UInt8], ignoring: Set<[UInt8]>) -> [UInt8]? {
        var pairs: [(name: [UInt8], value: [UInt8]?)] = []
        for piece in bytes.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            let equals = piece.firstIndex(of: UInt8(ascii: "="))
            guard let name = decode(piece[..<(equals ?? piece.endIndex)]) else { return nil }
            var value: [UInt8]?
            if let equals {
                guard let decoded = decode(piece[piece.index(after: equals)...]) else { return nil }
                value = decoded
            }
            if !ignoring.contains(name) { pairs.append((name, value)) }
        }
        // Stable: the values of one name keep their order, which a server may read as a list.
        let sorted = pairs.enumerated().sorted { a, b in
            a.element.name == b.element.name ? a.offset < b.offset : a.element.name.lexicographicallyPrecedes(b.element.name)
        }
        var out: [UInt8] = []
        for (i, pair) in sorted.enumerated() {
            if i > 0 { out.append(UInt8(ascii: "&")) }
            encode(pair.element.name, to: &out)
            if let value = pair.element.value {
                out.append(UInt8(ascii: "="))
                encode(value, to: &out)
            }
        }
        return out
    }

    static func decode(_ bytes: ArraySlice<UInt8>) -> [UInt8]? {
        var out: [UInt8] = []
        var i = bytes.startIndex
        while i < bytes.endIndex {
            let byte = bytes[i]
            if byte == UInt8(ascii: "+") {
                out.append(0x20)
            } else if byte == UInt8(ascii: "%") {
                guard bytes.distance(from: i, to: bytes.endIndex) >= 3, let high = hexValue(bytes[i + 1]), let low = hexValue(bytes[i + 2])
                else { return nil }
                out.append(high << 4 | low)
                i += 2
            } else {
                out.append(byte)
            }
            i += 1
        }
        return out
    }

    static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: c - 0x30
        case 0x41...0x46: c - 0x41 + 10
        case 0x61...0x66: c - 0x61 + 10
        default: nil
        }
    }

    /// Unreserved bytes (letters, digits, `-._~`) raw, every other byte as `%XX` (uppercase), a space as `%20`.
    static func encode(_ bytes: [UInt8], to out: inout [UInt8]) {
        let hex = Array("0123456789ABCDEF".utf8)
        for byte in bytes {
            switch byte {
            case 0x30...0x39, 0x41...0x5A, 0x61...0x7A, UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"): out.append(byte)
            default: out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
            }
        }
    }
}
