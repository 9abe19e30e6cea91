import Crypto
import Foundation
import OfflineBundle

/// Writes a release channel's next document (`packager channel write`): the release a fleet serves from now on, the
/// deltas that lead to it, a version one above the previous document's, an expiry, signed with the release key.
public enum ChannelWriter {
    /// A delta to list: its file, and the URL the fleet reads it from.
    public struct DeltaFile: Sendable {
        public var path: String
        public var url: String

        public init(path: String, url: String) {
            self.path = path
            self.url = url
        }
    }

    /// `url` with `{digest}` replaced by `digest`: an object's URL named by what it holds.
    public static func named(_ url: String, _ digest: String) -> String { url.replacingOccurrences(of: "{digest}", with: digest) }

    /// The next document and its signed envelope's JSON.
    ///
    /// - Parameters:
    ///   - release: the release bundle's file (read for its digest and size).
    ///   - url: where the fleet reads it (absolute, or relative to the channel's URL); `{digest}` in it stands for the
    ///     release's digest (and in a delta's URL for the delta's).
    ///   - deltas: deltas to it from earlier releases; each must stand for `release`.
    ///   - previous: the channel's current document (an envelope's JSON), whose version the new one follows; it must be
    ///     signed by the same key. Nil starts a channel at version 1.
    ///   - lifetime: seconds until the document expires.
    ///   - key: the release key.
    /// - Throws: ``PackagerError`` (`.invalidInput`) naming what is wrong: a release that is a delta, a delta that
    ///   stands for another release, a previous document that another key signed or that does not parse.
    public static func next(
        release: String, url: String, deltas: [DeltaFile] = [], previous: [UInt8]?, lifetime: Double, key: Curve25519.Signing.PrivateKey,
        now: Date = Date()
    ) throws -> (document: ChannelDocument, envelope: [UInt8]) {
        if (try? MountedBundle.deltaInfo(atPath: release)) != nil {
            throw PackagerError(.invalidInput, "\(release) is a delta: a channel names a release bundle (list the delta with --delta)")
        }
        let bundle: MountedBundle
        do {
            bundle = try MountedBundle(path: release)
        } catch let error as BundleError {
            throw PackagerError(.invalidInput, "\(release): \(error.message)")
        }
        let publicKey = Array(key.publicKey.rawRepresentation)
        var version: UInt64 = 1
        if let previous {
            let document: ChannelDocument
            do {
                document = try ChannelEnvelope.open(previous, publicKey: publicKey, source: "the previous channel document")
            } catch let error as BundleError {
                throw PackagerError(.invalidInput, error.message + " (--previous must be the channel's current document, signed with this --sign-key)")
            }
            version = document.version + 1
        }
        var listed: [ChannelDocument.Delta] = []
        for delta in deltas {
            let info: DeltaInfo?
            do {
                info = try MountedBundle.deltaInfo(atPath: delta.path)
            } catch let error as BundleError {
                throw PackagerError(.invalidInput, "\(delta.path): \(error.message)")
            }
            guard let info else { throw PackagerError(.invalidInput, "\(delta.path) is not a delta (packager delta OLD NEW writes one)") }
            guard info.target.digest == bundle.digest else {
                throw PackagerError(
                    .invalidInput,
                    "\(delta.path) stands for the release \(info.target.digest.prefix(12)), not \(release) (\(bundle.digest.prefix(12))): make it with packager delta OLD \(release)"
                )
            }
            guard let data = FileManager.default.contents(atPath: delta.path) else { throw PackagerError(.io, "cannot read \(delta.path)") }
            let digest = hexString(Array(SHA256.hash(data: data)))
            listed.append(.init(url: named(delta.url, digest), digest: digest, base: info.base, size: UInt64(data.count)))
        }
        let document = ChannelDocument(
            version: version, issued: now, expires: now.addingTimeInterval(lifetime),
            release: .init(url: named(url, bundle.digest), digest: bundle.digest, size: bundle.file.size), deltas: listed)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let payload = Array(try encoder.encode(document))
        let message = ChannelEnvelope.preAuthentication(type: ChannelDocument.payloadType, body: payload)
        let signature = try key.signature(for: message)
        let envelope = ChannelEnvelope(
            payloadType: ChannelDocument.payloadType, payload: Data(payload).base64EncodedString(),
            signatures: [.init(keyid: ChannelEnvelope.keyID(publicKey), sig: signature.base64EncodedString())])
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        return (document, Array(try encoder.encode(envelope)) + [0x0A])
    }
}
