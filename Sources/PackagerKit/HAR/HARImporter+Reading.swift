import Foundation
import OfflineBundle

/// Reading a HAR file's JSON with the flat reader of canonical bodies (``CanonicalJSON/Document``): the document read
/// once into nodes that point into its bytes, then the fields HAR import uses taken from them. JSONDecoder took a third
/// of `pack --from-har`'s time on a 10,000-entry recording (docs/BENCHMARKS.md).
extension HARImporter {
    /// A field whose value is not of the type HAR 1.2 gives it: where, and what it should be (nil: a value of the
    /// right type that does not fit, as 200.5 for a status).
    struct Misplaced: Error {
        var path: [HARKey]
        var expected: String?
    }

    /// A place in the document, as ``misplaced(_:expected:)`` names it.
    struct HARKey: CodingKey {
        var stringValue: String
        var intValue: Int?
        init(stringValue: String) { self.stringValue = stringValue }
        init(intValue: Int) {
            stringValue = String(intValue)
            self.intValue = intValue
        }
    }

    /// The file, or nil when the flat reader does not take the document (not JSON, nested deeper than it reads) or it
    /// is past 64 MiB (the reader reserves room for a node every two bytes, ten bytes of memory a byte, touched only as
    /// far as nodes are written): JSONDecoder then reads it, and says what is wrong.
    static func fastFile(_ data: Data) throws(Misplaced) -> File? {
        guard data.count <= 64 << 20, let document = CanonicalJSON.Document([UInt8](data)) else { return nil }
        var reading = Reading(document: document)
        return try reading.file()
    }

    private struct Reading {
        let document: CanonicalJSON.Document
        var path: [HARKey] = []

        /// Calls `body` with each member's name and value node of the object at `node`, or nil when it is `null` or
        /// absent; throws when it is another kind of value.
        mutating func object(_ node: Int?, _ body: (inout Reading, String, Int) throws(Misplaced) -> Void) throws(Misplaced) -> Bool {
            guard let node, document.kind(of: node) != .null else { return false }
            guard document.kind(of: node) == .object else { throw Misplaced(path: path, expected: "an object") }
            for name in document.members(of: node) {
                let key = document.string(name)
                path.append(HARKey(stringValue: key))
                try body(&self, key, name + 1)
                path.removeLast()
            }
            return true
        }

        mutating func list<T>(_ node: Int, _ element: (inout Reading, Int) throws(Misplaced) -> T) throws(Misplaced) -> [T]? {
            switch document.kind(of: node) {
            case .null: return nil
            case .array: break
            default: throw Misplaced(path: path, expected: "a list")
            }
            var found: [T] = []
            for (i, child) in document.children(of: node).enumerated() {
                path.append(HARKey(intValue: i))
                found.append(try element(&self, child))
                path.removeLast()
            }
            return found
        }

        func string(_ node: Int) throws(Misplaced) -> String? {
            switch document.kind(of: node) {
            case .null: return nil
            case .string: return document.string(node)
            default: throw Misplaced(path: path, expected: "a string")
            }
        }

        func double(_ node: Int) throws(Misplaced) -> Double? {
            switch document.kind(of: node) {
            case .null: return nil
            case .number:
                guard let value = Double(document.string(node)) else { throw Misplaced(path: path, expected: nil) }
                return value
            default: throw Misplaced(path: path, expected: "a number")
            }
        }

        /// A whole number, as JSONDecoder takes one for an `Int` (`200`, `2e2`); a fraction does not fit.
        func int(_ node: Int) throws(Misplaced) -> Int? {
            guard let value = try double(node) else { return nil }
            if let exact = Int(document.string(node)) { return exact }
            guard value.rounded() == value, let whole = Int(exactly: value) else { throw Misplaced(path: path, expected: nil) }
            return whole
        }

        func bool(_ node: Int) throws(Misplaced) -> Bool? {
            switch document.kind(of: node) {
            case .null: return nil
            case .boolean: return document.string(node) == "true"
            default: throw Misplaced(path: path, expected: "an object")
            }
        }

        mutating func pairs(_ node: Int) throws(Misplaced) -> [Pair]? {
            try list(node) { (reading, item) throws(Misplaced) -> Pair in
                var pair = Pair()
                let present = try reading.object(item) { (reading, key, value) throws(Misplaced) in
                    switch key {
                    case "name": pair.name = try reading.string(value)
                    case "value": pair.value = try reading.string(value)
                    default: break
                    }
                }
                guard present else { throw Misplaced(path: reading.path, expected: nil) }
                return pair
            }
        }

        mutating func file() throws(Misplaced) -> File {
            var file = File()
            _ = try object(0) { (reading, key, value) throws(Misplaced) in
                guard key == "log" else { return }
                var log = File.Log()
                _ = try reading.object(value) { (reading, key, value) throws(Misplaced) in
                    guard key == "entries" else { return }
                    log.entries = try reading.list(value) { (reading, item) throws(Misplaced) in try reading.entry(item) }
                }
                file.log = log
            }
            return file
        }

        mutating func entry(_ node: Int) throws(Misplaced) -> Entry {
            var entry = Entry()
            let present = try object(node) { (reading, key, value) throws(Misplaced) in
                switch key {
                case "request": entry.request = try reading.request(value)
                case "response": entry.response = try reading.response(value)
                case "startedDateTime": entry.startedDateTime = try reading.string(value)
                case "_resourceType": entry._resourceType = try reading.string(value)
                case "_webSocketMessages": entry._webSocketMessages = try reading.list(value) { _, _ in Present() }
                default: break
                }
            }
            guard present else { throw Misplaced(path: path, expected: nil) }
            return entry
        }

        mutating func request(_ node: Int) throws(Misplaced) -> Entry.Request? {
            var request = Entry.Request()
            let present = try object(node) { (reading, key, value) throws(Misplaced) in
                switch key {
                case "method": request.method = try reading.string(value)
                case "url": request.url = try reading.string(value)
                case "headers": request.headers = try reading.pairs(value)
                case "bodySize": request.bodySize = try reading.double(value)
                case "_bodySecret": request._bodySecret = try reading.bool(value)
                case "postData":
                    var post = Entry.Request.PostData()
                    let posted = try reading.object(value) { (reading, key, value) throws(Misplaced) in
                        switch key {
                        case "text": post.text = try reading.string(value)
                        case "encoding": post.encoding = try reading.string(value)
                        case "params": post.params = try reading.pairs(value)
                        default: break
                        }
                    }
                    if posted { request.postData = post }
                default: break
                }
            }
            return present ? request : nil
        }

        mutating func response(_ node: Int) throws(Misplaced) -> Entry.Response? {
            var response = Entry.Response()
            let present = try object(node) { (reading, key, value) throws(Misplaced) in
                switch key {
                case "status": response.status = try reading.int(value)
                case "headers": response.headers = try reading.pairs(value)
                case "redirectURL": response.redirectURL = try reading.string(value)
                case "content":
                    var content = Entry.Response.Content()
                    let given = try reading.object(value) { (reading, key, value) throws(Misplaced) in
                        switch key {
                        case "size": content.size = try reading.int(value)
                        case "text": content.text = try reading.string(value)
                        case "encoding": content.encoding = try reading.string(value)
                        default: break
                        }
                    }
                    if given { response.content = content }
                default: break
                }
            }
            return present ? response : nil
        }
    }
}
