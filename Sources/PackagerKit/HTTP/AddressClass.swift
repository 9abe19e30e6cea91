/// What kind of network address a URL's host names, read from the host as written.
///
/// IPv4 literals are read the way `inet_aton` and browsers read them (one to
/// four parts, each decimal, octal with a leading 0, or hex with 0x), so
/// `http://2130706433/`, `http://0x7f.1/` and `http://127.1/` are all
/// loopback; IPv6 literals include IPv4-mapped and IPv4-compatible forms.
/// Names are classified only when they are loopback by definition
/// (`localhost`, `*.localhost`) or a cloud metadata service's; a name that
/// resolves to a private address through DNS is not seen here.
enum AddressClass: Sendable, Equatable {
    /// 169.254.0.0/16, fe80::/10, the unspecified address and cloud metadata names: never fetched.
    case linkLocal
    /// 127.0.0.0/8, ::1, localhost.
    case loopback
    /// 10/8, 172.16/12, 192.168/16, 100.64/10 (shared), fc00::/7.
    case privateNetwork
    /// Anything else.
    case other

    /// Host names of cloud metadata services (they answer at link-local addresses).
    static let metadataNames: Set<String> = ["metadata.google.internal", "metadata", "instance-data", "instance-data.ec2.internal"]

    init(host: String) {
        let host = host.lowercased()
        if host.hasPrefix("[") && host.hasSuffix("]") {
            self = Self.ipv6(host.dropFirst().dropLast()) ?? .other
            return
        }
        let name = host.hasSuffix(".") ? String(host.dropLast()) : host
        if let address = Self.ipv4(name) {
            self = Self.classify(ipv4: address)
        } else if name == "localhost" || name.hasSuffix(".localhost") {
            self = .loopback
        } else if Self.metadataNames.contains(name) {
            self = .linkLocal
        } else {
            self = .other
        }
    }

    /// The dotted-quad form of an IPv4 literal written in any form `inet_aton` accepts, or nil.
    static func normalizedIPv4(_ host: String) -> String? {
        guard let a = ipv4(host) else { return nil }
        return "\(a >> 24).\((a >> 16) & 0xFF).\((a >> 8) & 0xFF).\(a & 0xFF)"
    }

    static func classify(ipv4 a: UInt32) -> AddressClass {
        switch a >> 24 {
        case 0: return .linkLocal  // "this network": 0.0.0.0 reaches the local host
        case 127: return .loopback
        case 10: return .privateNetwork
        default: break
        }
        if a >> 16 == 0xA9FE { return .linkLocal }  // 169.254/16
        // Cloud metadata services outside 169.254/16: Alibaba's 100.100.100.200 (inside the shared 100.64/10) and
        // Oracle's 192.0.0.192 (IETF protocol assignments, 192.0.0/24), never fetched like the link-local ones.
        if a == 0x6464_64C8 || a >> 8 == 0xC0_0000 { return .linkLocal }
        if a >> 20 == 0xAC1 { return .privateNetwork }  // 172.16/12
        if a >> 16 == 0xC0A8 { return .privateNetwork }  // 192.168/16
        if a >> 22 == (100 << 2 | 1) { return .privateNetwork }  // 100.64/10
        return .other
    }

    /// An IPv4 literal as `inet_aton` reads it: 1 to 4 parts, the last filling the remaining bytes.
    static func ipv4(_ text: String) -> UInt32? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...4).contains(parts.count) else { return nil }
        var values: [UInt64] = []
        for part in parts {
            guard let value = number(part) else { return nil }
            values.append(value)
        }
        var address: UInt64 = 0
        for (i, value) in values.enumerated() {
            if i < values.count - 1 {
                guard value <= 0xFF else { return nil }
                address |= value << UInt64(8 * (3 - i))
            } else {
                let bits = UInt64(8 * (4 - i))
                guard value < (1 << bits) else { return nil }
                address |= value
            }
        }
        return UInt32(address)
    }

    /// One part as `inet_aton` reads it: hex after `0x`, octal after a leading `0`, else decimal; any number of
    /// leading zeros (glibc accepts them all), nil past 2^32 or on a stray character.
    private static func number(_ part: Substring) -> UInt64? {
        guard !part.isEmpty else { return nil }
        var digits = part
        var radix: UInt64 = 10
        if digits.hasPrefix("0x") || digits.hasPrefix("0X") {
            digits = digits.dropFirst(2)
            radix = 16
        } else if digits.count > 1 && digits.hasPrefix("0") {
            radix = 8
        }
        var value: UInt64 = 0
        for character in digits {
            guard let digit = character.hexDigitValue, UInt64(digit) < radix else { return nil }
            value = value * radix + UInt64(digit)
            guard value <= UInt64(UInt32.max) else { return nil }
        }
        return value
    }

    /// The class of an IPv6 literal (without brackets), or nil when it is not one.
    static func ipv6(_ text: Substring) -> AddressClass? {
        var text = text
        if let zone = text.firstIndex(of: "%") { text = text[..<zone] }
        guard let groups = ipv6Groups(text) else { return nil }
        if groups.allSatisfy({ $0 == 0 }) { return .linkLocal }  // :: (unspecified)
        if groups[0..<7].allSatisfy({ $0 == 0 }) && groups[7] == 1 { return .loopback }
        // IPv4-mapped (::ffff:a.b.c.d) and IPv4-compatible (::a.b.c.d) addresses reach the IPv4 address.
        if groups[0..<5].allSatisfy({ $0 == 0 }) && (groups[5] == 0xFFFF || groups[5] == 0) {
            return classify(ipv4: UInt32(groups[6]) << 16 | UInt32(groups[7]))
        }
        // NAT64 (64:ff9b::/96, RFC 6052) reaches the IPv4 address in its last 32 bits.
        if groups[0] == 0x64 && groups[1] == 0xFF9B && groups[2..<6].allSatisfy({ $0 == 0 }) {
            return classify(ipv4: UInt32(groups[6]) << 16 | UInt32(groups[7]))
        }
        // AWS's metadata service over IPv6 (fd00:ec2::254), inside the private fc00::/7.
        if groups == [0xFD00, 0x0EC2, 0, 0, 0, 0, 0, 0x0254] { return .linkLocal }
        if groups[0] & 0xFFC0 == 0xFE80 { return .linkLocal }
        if groups[0] & 0xFE00 == 0xFC00 { return .privateNetwork }
        return .other
    }

    /// The eight 16-bit groups of an IPv6 address (with `::` and a trailing dotted IPv4), or nil.
    private static func ipv6Groups(_ text: Substring) -> [UInt16]? {
        var head: [UInt16] = []
        var tail: [UInt16] = []
        var sawGap = false
        let halves = text.components(separatedBy: "::")
        guard halves.count <= 2 else { return nil }
        sawGap = halves.count == 2
        func parse(_ half: String, into groups: inout [UInt16]) -> Bool {
            guard !half.isEmpty else { return true }
            let pieces = half.split(separator: ":", omittingEmptySubsequences: false)
            for (i, piece) in pieces.enumerated() {
                if i == pieces.count - 1, piece.contains(".") {
                    guard let v4 = ipv4Strict(piece) else { return false }
                    groups.append(UInt16(v4 >> 16))
                    groups.append(UInt16(v4 & 0xFFFF))
                } else {
                    guard (1...4).contains(piece.count), let value = UInt16(piece, radix: 16) else { return false }
                    groups.append(value)
                }
            }
            return true
        }
        guard parse(halves[0], into: &head) else { return nil }
        if sawGap { guard parse(halves[1], into: &tail) else { return nil } }
        let missing = 8 - head.count - tail.count
        guard sawGap ? missing >= 1 : missing == 0 else { return nil }
        return head + [UInt16](repeating: 0, count: sawGap ? missing : 0) + tail
    }

    private static func ipv4Strict(_ text: Substring) -> UInt32? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var address: UInt32 = 0
        for part in parts {
            guard let value = UInt32(part), value <= 255 else { return nil }
            address = address << 8 | value
        }
        return address
    }
}
