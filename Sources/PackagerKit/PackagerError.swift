/// An error raised by the build side: packing, writing, checking, extracting.
///
/// Like `BundleError`, it carries a code to switch on, a
/// sentence for people, and the file or entry concerned.
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

    /// Creates an error.
    public init(_ code: Code, _ message: String, subject: String? = nil) {
        self.code = code
        self.message = message
        self.subject = subject
    }

    public var description: String { subject.map { "\(message) (\($0))" } ?? message }
}
