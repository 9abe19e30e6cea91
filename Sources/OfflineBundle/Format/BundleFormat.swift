/// Constants of the bundle format, version 3 (see docs/FORMAT.md).
public enum BundleFormat {
    /// The format version this library writes. It also mounts versions 1 and 2.
    public static let version: UInt32 = 3
    /// The ZIP entry that holds the compact binary index.
    public static let indexEntryName = "index.bin"
    /// The ZIP entry that holds the human-readable JSON manifest.
    public static let manifestEntryName = "manifest.json"
    /// The ZIP entry that holds the optional Ed25519 signature block.
    public static let signatureEntryName = "signature.json"
    /// The folder prefix of body entries; a body is `b/` + the first 16 (or more) lowercase hex digits of its SHA-256.
    public static let bodyPrefix = "b/"
    /// The prefix of the ZIP archive comment, followed by `sha256:` and the bundle digest.
    public static let commentPrefix = commentPrefix(version: version)
    /// The archive comment prefix of a bundle of format `version`: `packager-bundle/N ` (docs/FORMAT.md §2.5).
    public static func commentPrefix(version: UInt32) -> String { "packager-bundle/\(version) " }
    /// The format versions this library mounts.
    public static let readableVersions: ClosedRange<UInt32> = 1...3
    /// The format version an archive comment `packager-bundle/N sha256:…` names, when this library mounts it; nil for
    /// any other comment.
    package static func version(ofComment comment: String) -> UInt32? {
        readableVersions.first { comment.hasPrefix(commentPrefix(version: $0) + "sha256:") }
    }
    /// The most `index.bin` may claim to inflate to per stored byte, when deflated (version 3, §4): real indexes
    /// deflate by 2 to 10, so a bomb costs a file of a 64th of what it makes.
    package static let indexMaxRatio: UInt64 = 64
    /// The most bytes one entry's header block may hold (docs/FORMAT.md §4.5): 128 KiB, so at most 32,768 lines of
    /// the shortest form (`a: ` + LF), far under what an HTTP field list holds (65,535), and far over what an origin
    /// sends (servers refuse response heads past 8 to 80 KiB). Writers refuse a larger block and readers refuse the
    /// index that holds one, so no bundle makes a reader build a response it cannot hold.
    public static let maxHeaderBlockBytes = 128 << 10
    /// Version 1's body prefix: `bodies/` + all 64 hex digits.
    public static let v1BodyPrefix = "bodies/"
    /// Version 1's archive comment prefix.
    public static let v1CommentPrefix = "packager-bundle/1 "
    /// The archive comment prefix of a delta bundle (docs/FORMAT.md §12), followed by `sha256:` and the digest of the
    /// bundle it stands for, then ` base:` and the digest of the bundle it is mounted over. A reader that does not know
    /// deltas finds no `packager-bundle/` comment and refuses the file.
    public static let deltaCommentPrefix = deltaCommentPrefix(format: deltaFormat)
    /// The delta format this library writes for a bundle of this format version: 2 (a delta of a version-3 bundle);
    /// format 1 is a delta of a version-2 bundle, and is still read (docs/FORMAT.md §12).
    public static let deltaFormat = 2
    /// The archive comment prefix of a delta of format `format`: `packager-delta/N `.
    public static func deltaCommentPrefix(format: Int) -> String { "packager-delta/\(format) " }
    /// The delta formats this library mounts, and the bundle format version each stands for.
    package static func deltaTargetVersion(format: Int) -> UInt32? { [1: 2, 2: 3][format] }
    /// The ZIP entry of a delta bundle that says what it applies to and how to rebuild the bundle it stands for.
    public static let deltaEntryName = "delta.json"

    /// Whether `level` is a level byte (§12.1): 0 stored, 1–12 libdeflate's raw deflate, `0x80` + 1–9 zlib's.
    package static func isLevelByte(_ level: UInt8) -> Bool { level <= 12 || (0x81...0x89).contains(level) }
    /// How many deltas may stand over one another (a delta over a delta … over a bundle).
    public static let maxDeltaDepth = 8
    /// The domain-separation line that starts every signed message.
    public static let signatureDomain = "packager-bundle-signature/1\n"

    /// The ZIP entry name of the body with this SHA-256 digest, spelled with `digits` hex digits (16 unless another
    /// body of the bundle shares them).
    /// Whether `name` is a body's entry name (versions 2 and 3): `b/` and 16 to 64 lowercase hexadecimal digits (§2.1).
    package static func isBodyName(_ name: String) -> Bool {
        guard name.hasPrefix(bodyPrefix) else { return false }
        let digits = name.utf8.dropFirst(bodyPrefix.utf8.count)
        return (16...64).contains(digits.count) && digits.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
    }

    public static func bodyEntryName(sha256: [UInt8], digits: Int = 16) -> String {
        bodyPrefix + String(hexString(sha256).prefix(digits))
    }

    /// The exact bytes an Ed25519 signature covers, for a bundle whose digest is `bundleDigestHex`.
    ///
    /// The bundle digest is the SHA-256 of `index.bin`, which holds the SHA-256 of
    /// `manifest.json` and of every body, so the signature covers all of them.
    public static func signedMessage(bundleDigestHex: String) -> [UInt8] {
        Array((signatureDomain + "sha256:" + bundleDigestHex + "\n").utf8)
    }
}

/// How an entry came to be in the bundle.
public enum EntryKind: UInt8, Sendable, Codable, CaseIterable, CustomStringConvertible {
    /// A response recorded from a server (or packed from a local folder as if served).
    case recorded = 0
    /// A remote URL answered by a local file, as the declaration asked.
    case substituted = 1
    /// A URL the declaration blocks: answered with an empty response, never fetched.
    case blocked = 2

    public var description: String {
        switch self {
        case .recorded: "recorded"
        case .substituted: "substituted"
        case .blocked: "blocked"
        }
    }

    /// Parses the manifest spelling of a kind.
    public init?(name: String) {
        guard let kind = Self.allCases.first(where: { $0.description == name }) else { return nil }
        self = kind
    }

    public init(from decoder: any Decoder) throws {
        let name = try decoder.singleValueContainer().decode(String.self)
        guard let kind = EntryKind(name: name) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "unknown entry kind \(name)"))
        }
        self = kind
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}

/// How a body is stored in its ZIP entry.
public enum BodyCompression: UInt16, Sendable, Codable, CustomStringConvertible {
    /// Stored as is (ZIP method 0).
    case stored = 0
    /// Raw deflate (ZIP method 8).
    case deflate = 8

    public var description: String { self == .stored ? "stored" : "deflate" }

    public init(from decoder: any Decoder) throws {
        let name = try decoder.singleValueContainer().decode(String.self)
        switch name {
        case "stored": self = .stored
        case "deflate": self = .deflate
        default:
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "unknown compression \(name)"))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}
