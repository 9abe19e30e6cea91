import Foundation

extension MountedBundle {
    /// Options that decide what mounting insists on and how reads are checked.
    public struct Options: Sendable {
        /// How each body read is checked before it is returned.
        public enum Verification: Sendable {
            /// CRC-32 of the inflated bytes (fast; catches damage, not tampering).
            case crc32
            /// CRC-32 and SHA-256 of the inflated bytes against the index.
            case sha256
        }

        /// When set, the bundle must carry a valid Ed25519 signature by this key (32 raw bytes).
        public var requiredPublicKey: [UInt8]?
        /// How body reads are checked. Defaults to SHA-256 when a key is required, else CRC-32.
        public var verification: Verification?
        /// Largest inflated size a single body may have; larger bodies are refused as hostile.
        public var maxBodySize: UInt64
        /// Largest inflated-to-stored ratio a deflated body may claim (deflate cannot exceed about 1032:1).
        public var maxCompressionRatio: UInt64

        /// Bytes of inflated bodies kept in memory for identity answers (least recently used first out); 0 keeps none.
        /// A body larger than an eighth of it is never kept.
        public var inflatedCacheBytes: Int
        /// The name the bundle goes by in logs, metrics and access logs (``MountedBundle/label``); the file's name
        /// when nil.
        public var label: String?
        /// Bodies up to this many bytes (as sent) that were not yet checked in this mount are read through their checks
        /// before their first byte is sent, so a damaged one is an error answer and never a 200 with wrong bytes; larger
        /// ones are checked as they stream and cut when they fail (``scrub(shouldStop:)`` checks them ahead). A body
        /// is checked once a mount either way, while the file is the one mounted. Default 16 MiB.
        public var checkBeforeSend: UInt64
        /// Where a tool that goes through a whole bundle keeps an `index.bin` that inflates past `above` bytes: in a
        /// mapped scratch file in `folder`, its pages let go as they are read (``MappedIndex``), so the pass's memory
        /// does not grow with the entries. Nil (the default, and what a service wants) keeps every index in memory.
        package var indexScratch: (folder: String, above: Int)?

        /// Creates options.
        public init(
            requiredPublicKey: [UInt8]? = nil, verification: Verification? = nil, maxBodySize: UInt64 = 4 << 30, maxCompressionRatio: UInt64 = 1100,
            inflatedCacheBytes: Int = 0, label: String? = nil, checkBeforeSend: UInt64 = 16 << 20
        ) {
            self.label = label
            self.checkBeforeSend = checkBeforeSend
            self.requiredPublicKey = requiredPublicKey
            self.verification = verification
            self.maxBodySize = maxBodySize
            self.maxCompressionRatio = maxCompressionRatio
            self.inflatedCacheBytes = inflatedCacheBytes
        }

        /// Options for a tool's pass over a whole bundle (exports, check): bodies checked by SHA-256, and an `index.bin`
        /// past 8 MiB inflated into a mapped scratch file in `folder` (``Options/indexScratch``).
        package static func wholeBundlePass(scratchIn folder: String) -> Options {
            var options = Options(verification: .sha256)
            options.indexScratch = (folder.isEmpty ? "." : folder, 8 << 20)
            return options
        }
    }
}
