import Foundation
import HTTPTypes
import OfflineBundle
import Tracing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// What OfflineURLProtocol converts between URLSession's types and the loader's.

extension OfflineURLProtocol {
    /// The request as the loader sees it. Accept-Encoding is left out: URLSession does not decode what a protocol
    /// hands it, so bodies go out as identity.
    /// A body given as `httpBody` is matched as it is; one given as a stream is read only when a bundle recorded an
    /// answer to a body at this URL and method (``OfflineLoader/matchesBody(method:url:)``), and then kept in
    /// `collectedBody` for the network.
    static func bundleRequest(_ request: URLRequest, url: URL, collectedBody: Data? = nil) -> BundleRequest {
        var headers = HTTPFields()
        for (name, value) in request.allHTTPHeaderFields ?? [:] where name.lowercased() != "accept-encoding" {
            if let fieldName = HTTPField.Name(name) { headers.append(HTTPField(name: fieldName, value: value)) }
        }
        return BundleRequest(method: request.httpMethod ?? "GET", url: url.absoluteString, headers: headers, body: collectedBody ?? request.httpBody)
    }

    /// The bytes of a request body given as a stream, when a bundle may match them (nil otherwise).
    static func streamedBody(of request: URLRequest, url: URL, loader: OfflineLoader) -> Data? {
        guard request.httpBody == nil, let stream = request.httpBodyStream, loader.matchesBody(method: request.httpMethod ?? "GET", url: url.absoluteString)
        else { return nil }
        var data = Data()
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        stream.open()
        defer { stream.close() }
        while true {
            let n = stream.read(&chunk, maxLength: chunk.count)
            if n <= 0 { break }
            data.append(contentsOf: chunk[0..<n])
        }
        return data
    }

    /// Keeps a network response in the loader's last-seen cache (URLSession has decoded its body), written off the
    /// task's queue. Not kept: a response reached by following redirects (it answers another URL), and one to a
    /// request the session sent cookies with (they are not among the request's own headers).
    static func remember(_ answer: NetworkAnswer, for request: BundleRequest, loader: OfflineLoader, session: URLSession) {
        guard let response = answer.response as? HTTPURLResponse, response.url?.absoluteString == request.url else { return }
        if let url = response.url, session.configuration.httpShouldSetCookies,
            session.configuration.httpCookieStorage?.cookies(for: url)?.isEmpty == false
        {
            return
        }
        var headers = HTTPFields()
        for (name, value) in response.allHeaderFields {
            // The body was decoded: its encoding and length no longer describe it.
            guard let name = name as? String, let value = value as? String, !["content-encoding", "content-length"].contains(name.lowercased()),
                let fieldName = HTTPField.Name(name)
            else { continue }
            headers.append(HTTPField(name: fieldName, value: value))
        }
        guard let recording = LastSeenRecording(loader: loader, request: request, status: response.statusCode, headers: headers) else { return }
        let data = answer.data
        DispatchQueue.global().async {
            var kept = recording
            kept.add(data)
            kept.finish()
        }
    }

    /// `request` as it goes to the network: within the policy's timeout (and its own), carrying the load span's
    /// trace, with a streamed body read to match it against the bundle sent as the bytes read.
    static func networkRequest(_ request: URLRequest, within pending: OfflineLoader.PendingLoad, tracer: any Tracer, body: Data?) -> URLRequest {
        var outgoing = request
        if let limit = pending.timeout {
            let seconds = Double(limit.components.seconds) + Double(limit.components.attoseconds) / 1e18
            outgoing.timeoutInterval = min(seconds, request.timeoutInterval)
        }
        tracer.inject(pending.context, into: &outgoing, using: URLRequestInjector())
        if let body { outgoing.httpBody = body }
        return outgoing
    }

    /// Whether the protocol takes `request`. A bundle-first URL that nothing here answers goes to URLSession's own
    /// HTTP stack, with the app's session, delegates and cookies: nothing for this protocol to add (a block rule
    /// answers it here, whatever the method). Every other request is taken.
    static func takes(_ request: URLRequest, url: URL, loader: OfflineLoader) -> Bool {
        guard loader.policy(for: url.absoluteString) == .bundleFirst else { return true }
        // A streamed body is not read here (the stream is read once): the protocol takes the request, and sends it
        // to the network itself, with the body it read, when the bundle has no answer.
        if request.httpBody == nil, request.httpBodyStream != nil, loader.matchesBody(method: request.httpMethod ?? "GET", url: url.absoluteString) {
            return true
        }
        return loader.hasEntry(for: bundleRequest(request, url: url))
    }

    /// The body of `answer` as the protocol hands it over: the chunks read (and checked) before the response goes,
    /// and the reader of the rest. swift-corelibs-foundation keeps only the last piece a protocol loads for a task with
    /// a completion handler, so there the whole body is read first, in one piece (a network body too: URLSession
    /// hands it whole). On Apple platforms the first chunk (for most pages, the whole body) is read before the
    /// response goes, and a large body streams on; one that fails its check ends the load as an error.
    static func body(of answer: BundleResponse) throws -> (chunks: [Data], rest: BodyReader?) {
        #if canImport(FoundationNetworking)
            return ([try answer.bodyData()], nil)
        #else
            guard let opened = try answer.openBody() else { return ([], nil) }
            return (opened.chunks, opened.second == nil ? nil : opened.reader)
        #endif
    }

    /// swift-corelibs-foundation cannot follow a redirect a protocol reports, so recorded hops are followed inside the
    /// bundle and the final response is delivered; on Apple platforms URLSession follows them.
    #if canImport(FoundationNetworking)
        static let redirectsFollowedHere = 10
    #else
        static let redirectsFollowedHere = 0
    #endif

    /// A bundle-only miss as URLSession's error, said with the nearest recorded request.
    static func miss(_ error: any Error, url: URL) -> URLError {
        URLError(.resourceUnavailable, userInfo: [NSLocalizedDescriptionKey: (error as? BundleError)?.message ?? "not in the offline bundle: \(url)"])
    }

    /// On Apple platforms, the request URLSession follows for a recorded redirect (as it follows a network one).
    static func redirect(_ answer: BundleResponse, of request: URLRequest, url: URL) -> URLRequest? {
        guard (300...399).contains(answer.status), answer.status != 304, let location = answer.header("location"),
            let target = URL(string: location, relativeTo: url)?.absoluteURL
        else { return nil }
        var next = request
        next.url = target
        return next
    }
}

extension HTTPURLResponse {
    /// The loader's answer as URLSession's response for `url`.
    convenience init?(_ answer: BundleResponse, url: URL) {
        var fields: [String: String] = [:]
        for field in answer.headers { fields[field.name.canonicalName] = fields[field.name.canonicalName].map { $0 + ", " + field.value } ?? field.value }
        self.init(url: url, statusCode: answer.status, httpVersion: "HTTP/1.1", headerFields: fields)
    }
}

/// What the network answered: its response and the whole body, decoded.
struct NetworkAnswer {
    var response: URLResponse
    var data: Data
}

/// A value carried to another thread (a session to the thread that sends on it, a request, the network's answer,
/// the protocol instance to its task's queue).
// Unchecked: it carries only these. URLSession is thread-safe and URLRequest, URLResponse and Data are not changed once
// carried, none marked Sendable by corelibs-foundation; the protocol instance's mutable state is its NetworkCall's,
// behind that one's lock, and its client is only called on the task's queue, where the carried instance is used.
struct Carried<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

/// Writes a trace context into a request's header fields.
struct URLRequestInjector: Injector {
    func inject(_ value: String, forKey key: String, into request: inout URLRequest) {
        request.setValue(value, forHTTPHeaderField: key)
    }
}
