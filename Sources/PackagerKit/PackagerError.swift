/// An error raised by the build side: packing, writing, checking, extracting.
///
/// Like `BundleError`, it carries a code to switch on, a
/// sentence for people, and the file or entry concerned.
import OfflineBundle

public struct PackagerError: Error, Sendable, CustomStringConvertible {
    /// What kind of problem this is.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Value: Hashable, Sendable { case io, invalidInput, archive, duplicate, unsafeEntry, integrity, `internal` }
        private let value: Value
        private init(_ value: Value) { self.value = value }

        /// A file could not be read or written.
        public static let io = Code(.io)
        /// An argument or input file cannot be used as given.
        public static let invalidInput = Code(.invalidInput)
        /// libarchive refused an archive.
        public static let archive = Code(.archive)
        /// Two entries answer the same request key.
        public static let duplicate = Code(.duplicate)
        /// An archive entry would escape the destination, or is a link.
        public static let unsafeEntry = Code(.unsafeEntry)
        /// A bundle failed an integrity check.
        public static let integrity = Code(.integrity)
        /// A library the tool relies on failed unexpectedly.
        public static let `internal` = Code(.internal)

        public var description: String {
            switch value {
            case .io: "io"
            case .invalidInput: "invalid-input"
            case .archive: "archive"
            case .duplicate: "duplicate"
            case .unsafeEntry: "unsafe-entry"
            case .integrity: "integrity"
            case .internal: "internal"
            }
        }
    }

    /// What kind of problem this is.
    public var code: Code
    /// A sentence that says what is wrong.
    public var message: String
    /// The file, archive entry or request key concerned, when there is one.
    public var subject: String?
    /// The error that caused this one, when there is one (a system call's, libarchive's, the YAML parser's).
    public var cause: (any Error)?

    /// Creates an error.
    public init(_ code: Code, _ message: String, subject: String? = nil, cause: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.subject = subject
        self.cause = cause
    }

    /// The message, the cause's reason after a colon (a system call's or libarchive's), and the subject in parentheses.
    public var description: String {
        var text = message
        if let reason = cause as? any ReasonText { text += ": \(reason)" }
        if let subject { text += " (\(subject))" }
        return text
    }
}
