import Foundation
import NIOConcurrencyHelpers

/// SOCK_STREAM as `socket` and `ai_socktype` take it: an enumeration's raw value in Glibc, an Int32 elsewhere.
#if canImport(Glibc)
    private let streamSocketType = Int32(SOCK_STREAM.rawValue)
#else
    private let streamSocketType = SOCK_STREAM
#endif

/// What the addresses a host name resolves to are, looked up once per name (through `getaddrinfo`, so
/// `/etc/hosts` counts as DNS does) and remembered for the run.
///
/// The crawl asks only for names the declaration does not name, before it fetches from them: a public-looking
/// name that points at 127.0.0.1, a private network or a metadata service is refused like the address itself.
/// (A name whose answer changes between this lookup and the connection, DNS rebinding proper, is not caught.)
final class HostResolver: Sendable {
    private let cache = NIOLockedValueBox<[String: [AddressClass]]>([:])

    /// The classes of the addresses `host` resolves to; empty when it does not resolve.
    func classes(of host: String) -> [AddressClass] {
        if let known = cache.withLockedValue({ $0[host] }) { return known }
        let found = Self.resolve(host)
        cache.withLockedValue { $0[host] = found }
        return found
    }

    private static func string(_ text: [CChar]) -> String {
        String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private static func resolve(_ host: String) -> [AddressClass] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = streamSocketType
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &list) == 0, let first = list else { return [] }
        defer { freeaddrinfo(first) }
        var classes: [AddressClass] = []
        var node: UnsafeMutablePointer<addrinfo>? = first
        while let info = node {
            var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
            switch info.pointee.ai_family {
            case AF_INET:
                info.pointee.ai_addr.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { address in
                    var raw = address.pointee.sin_addr
                    _ = inet_ntop(AF_INET, &raw, &text, socklen_t(text.count))
                }
                classes.append(AddressClass(host: Self.string(text)))
            case AF_INET6:
                info.pointee.ai_addr.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { address in
                    var raw = address.pointee.sin6_addr
                    _ = inet_ntop(AF_INET6, &raw, &text, socklen_t(text.count))
                }
                classes.append(AddressClass(host: "[" + Self.string(text) + "]"))
            default:
                break
            }
            node = info.pointee.ai_next
        }
        return classes
    }
}
