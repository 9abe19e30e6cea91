import HTTPTypes
import NIOHTTP1

extension HTTPFields {
    /// NIO's header list (AsyncHTTPClient's) as swift-http-types' fields, in order; a name that is not a token is
    /// dropped. The one conversion at that seam.
    init(_ headers: HTTPHeaders) {
        self.init()
        for (name, value) in headers {
            if let field = HTTPField.Name(name) { append(HTTPField(name: field, value: value)) }
        }
    }
}
