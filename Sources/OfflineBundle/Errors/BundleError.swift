#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// An error raised while mounting, reading or checking a bundle.
///
/// Every error carries a ``code`` that callers can switch on, a sentence for
/// people, and, where the problem is local to one part of the file, the name of
/// the ZIP entry or the request key concerned.
public struct BundleError: Error, Sendable, CustomStringConvertible {
    /// What kind of problem this is.
    ///
    /// Codes are a struct over a private enum so that new codes can be added
    /// without breaking callers that switch over the known ones.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Value: Hashable, Sendable {
            case io, notABundle, truncated, corruptDirectory, corruptIndex, corruptBody
            case hostile, unsupported, signature, notFound, invalidArgument, wrongBase, remote, changed
        }
        private let value: Value
        private init(_ value: Value) { self.value = value }

        /// The file could not be opened or read.
        public static let io = Code(.io)
        /// The file is not a ZIP container, or not one that holds a bundle.
        public static let notABundle = Code(.notABundle)
        /// The file ends before a structure it declares.
        public static let truncated = Code(.truncated)
        /// The ZIP central directory or a local header is damaged or inconsistent.
        public static let corruptDirectory = Code(.corruptDirectory)
        /// The compact index is damaged or disagrees with the container.
        public static let corruptIndex = Code(.corruptIndex)
        /// A body's bytes do not match its recorded size, CRC-32 or SHA-256.
        public static let corruptBody = Code(.corruptBody)
        /// The file is built to harm a reader: overlapping entries, absurd ratios, sizes that lie.
        public static let hostile = Code(.hostile)
        /// The file uses a format version or feature this reader does not know.
        public static let unsupported = Code(.unsupported)
        /// A signature is missing, does not verify, or was made by another key.
        public static let signature = Code(.signature)
        /// A requested entry is not in the bundle.
        public static let notFound = Code(.notFound)
        /// A caller passed a value that cannot be used.
        public static let invalidArgument = Code(.invalidArgument)
        /// A delta bundle was given a base other than the one it was made over (its bundle digest is another).
        public static let wrongBase = Code(.wrongBase)
        /// A remote bundle's server could not be reached, or answered what a range read cannot use (an error status,
        /// a range other than the one asked for, the whole object where ranges are required).
        public static let remote = Code(.remote)
        /// A remote bundle's object was replaced since it was mounted (its ETag or size changed): mount it again.
        public static let changed = Code(.changed)

        public var description: String {
            switch value {
            case .io: "io"
            case .notABundle: "not-a-bundle"
            case .truncated: "truncated"
            case .corruptDirectory: "corrupt-directory"
            case .corruptIndex: "corrupt-index"
            case .corruptBody: "corrupt-body"
            case .hostile: "hostile"
            case .unsupported: "unsupported"
            case .signature: "signature"
            case .notFound: "not-found"
            case .invalidArgument: "invalid-argument"
            case .wrongBase: "wrong-base"
            case .remote: "remote"
            case .changed: "changed"
            }
        }
    }

    /// What kind of problem this is.
    public var code: Code
    /// A sentence that says what is wrong.
    public var message: String
    /// The ZIP entry name or request key the problem concerns, when there is one.
    public var entry: String?
    /// The error that caused this one, when there is one (a system call's, for a file that cannot be opened or read);
    /// a system call's reason is printed after the message.
    public var underlying: (any Error & Sendable)?

    /// Creates an error.
    public init(_ code: Code, _ message: String, entry: String? = nil, underlying: (any Error & Sendable)? = nil) {
        self.code = code
        self.message = message
        self.entry = entry
        self.underlying = underlying
    }

    public var description: String {
        var text = message
        if let entry { text += " (entry \(entry))" }
        if let reason { text += ": \(reason)" }
        return text
    }

    /// A system call's reason in words (`no such file or directory`), when the underlying error gives one.
    package var reason: String? { (underlying as? any ReasonText).map { "\($0)" } }
}

/// A `DecodingError` in words: where in the document (`target.size`) and what was wrong, without Swift's own
/// rendering of the error (`DecodingError.dataCorrupted(Context(codingPath: …))`).
package enum DecodingProblem {
    package static func describe(_ error: any Error) -> String {
        guard let error = error as? DecodingError else { return "\(error)" }
        func at(_ path: [any CodingKey]) -> String {
            let shown = path.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
            return shown.isEmpty ? "" : String(shown.drop { $0 == "." }) + ": "
        }
        switch error {
        case .typeMismatch(let type, let context): return at(context.codingPath) + "expected \(kind(type))"
        case .valueNotFound(let type, let context): return at(context.codingPath) + "no value, where \(kind(type)) is expected"
        case .keyNotFound(let key, let context): return at(context.codingPath + [key]) + "missing"
        case .dataCorrupted(let context):
            // The parser's own reason, when it gives one (where the JSON breaks, a number its field cannot hold).
            let reason = context.underlyingError.map { " (\(reasonText($0)))" } ?? ""
            return context.codingPath.isEmpty
                ? "not JSON, or a number out of its field's range: \(context.debugDescription)\(reason)"
                : at(context.codingPath) + context.debugDescription + reason
        @unknown default: return "\(error)"
        }
    }

    /// An underlying error's text: its debug description when it is an `NSError`-like error that has one.
    private static func reasonText(_ error: any Error) -> String {
        let text = "\(error)"
        if let range = text.range(of: "NSDebugDescription=") { return String(text[range.upperBound...].prefix { $0 != "}" }) }
        return text
    }

    private static func kind(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Bool.Type: "true or false"
        case is any BinaryInteger.Type: "a whole number in range"
        case is any BinaryFloatingPoint.Type: "a number"
        default:
            "\(type)".hasPrefix("Array<") ? "an array" : "\(type)".hasPrefix("Dictionary<") ? "an object" : "a value of type \(type)"
        }
    }
}

extension BundleError {
    /// Whether the error is about the input given rather than a damaged file: a delta over another bundle than its own,
    /// an unusable argument, a path that does not exist or is not a file. (The CLI exits 2 for these, 1 for damage.)
    package var isWrongInput: Bool {
        if code == .wrongBase || code == .invalidArgument { return true }
        guard code == .io, let errno = (underlying as? SystemCallError)?.code else { return false }
        return [ENOENT, ENOTDIR, EISDIR].contains(errno)
    }
}
