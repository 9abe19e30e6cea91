import HTTPTypes
import NIOHPACK

/// Response heads as HTTP/2 sends them: `:status` and the answer's fields as HPACK ones, made from the typed head (a
/// status and `HTTPFields`) as ``ResponseHead`` makes HTTP/1.1's bytes from it. Nothing is read back from bytes.
enum HTTP2Head {
    /// The fields whose values change from answer to answer: sent without indexing (RFC 7541 §6.2.2), so they never
    /// push the repeating ones out of the connection's HPACK table. (`date` is indexed: it is the same for a second.)
    private static let volatile: Set<String> = ["etag", "content-length", "last-modified", "age", "expires", "content-range", "location"]
    /// HTTP/1.1's connection fields, which HTTP/2 forbids (RFC 9113 §8.2.2).
    static let connectionFields: Set<String> = ["connection", "keep-alive", "transfer-encoding", "upgrade", "proxy-connection"]

    /// `:status`, the fields but Age (added per request, as HTTP/1.1's head adds it) and those HTTP/2 forbids, names
    /// lowercase (RFC 9113 §8.2.1), and `server` when given; values as ``ResponseHead/line(_:_:_:)`` writes them.
    static func fields(status: Int, fields: HTTPFields, serverName: String?) -> HPACKHeaders {
        var headers = HPACKHeaders()
        headers.reserveCapacity(fields.count + 3)
        headers.add(name: ":status", value: String(status))
        for field in fields where field.name != .age {
            let name = field.name.canonicalName
            guard !connectionFields.contains(name) else { continue }
            headers.add(name: name, value: ResponseHead.safe(field.value), indexing: volatile.contains(name) ? .nonIndexable : .indexable)
        }
        if let serverName { headers.add(name: "server", value: ResponseHead.safe(serverName)) }
        return headers
    }

    /// Adds the lines of this request to a head: `date`, and `age` when the answer has one.
    static func end(_ headers: inout HPACKHeaders, date: String, age: Int?) {
        headers.add(name: "date", value: date)
        if let age { headers.add(name: "age", value: String(age), indexing: .nonIndexable) }
    }
}
