import HTTPTypes
import NIOCore
import NIOHTTP1

// The one place where NIO's `HTTPHeaders` and swift-http-types' `HTTPFields` meet: the runtime speaks `HTTPFields`, and
// the modules over NIO (the channel server, AsyncHTTPClient, Vapor) convert at their seams through these.

extension HTTPFields {
    /// NIO's header fields as the runtime's, in order; a name that is not a valid field name is left out, and so is
    /// any name `excluding` says to leave out.
    package init(_ headers: HTTPHeaders, excluding: (String) -> Bool = { _ in false }) {
        self.init()
        reserveCapacity(headers.count)
        for (name, value) in headers where !excluding(name) {
            if let fieldName = HTTPField.Name(name) { append(HTTPField(name: fieldName, value: value)) }
        }
    }
}

extension HTTPHeaders {
    /// The runtime's header fields as NIO's, in order.
    package init(_ fields: HTTPFields) {
        self.init()
        reserveCapacity(fields.count)
        for field in fields { add(name: field.name.canonicalName, value: field.value) }
    }
}

extension TimeAmount {
    /// `duration` as NIO's time, saturating: a Duration of centuries (meant as "no limit") does not overflow its
    /// nanoseconds.
    package init(saturating duration: Duration) {
        let (seconds, attoseconds) = duration.components
        let nanoseconds = seconds >= Int64.max / 1_000_000_000 ? Int64.max : seconds * 1_000_000_000 + attoseconds / 1_000_000_000
        self = .nanoseconds(max(0, nanoseconds))
    }
}
