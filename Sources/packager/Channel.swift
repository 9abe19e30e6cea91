import ArgumentParser
import Foundation
import OfflineBundle
import PackagerKit

extension Packager {
    struct Channel: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "channel",
            abstract: "Write a release channel's signed document, which a fleet of servers follows (packager serve --channel).",
            subcommands: [Write.self]
        )

        struct Write: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "write",
                abstract: "Write the channel's next document: the release served from now on, signed with the release key.",
                discussion: """
                    The document names the release (its URL, digest and size), the deltas to it from recent releases, a \
                    version one above --previous's, and an expiry. Upload the release objects first (immutable, named by \
                    their digest, say, so they may be cached forever), then the document at the channel's URL. A rollback \
                    is a new document naming the older release.

                    Exits 0 when the document is written; 2 when the input is wrong (a release that is a delta, a delta \
                    that stands for another release, a --previous that another key signed).

                    Example: packager channel write docs-r2.zip --url 'releases/{digest}.zip' --previous channel.json \
                    --sign-key release.key -o channel.json
                    """
            )

            @Argument(help: "The release bundle the channel names from now on.")
            var release: String

            @Option(help: "Where the fleet reads the release: a URL, or a path relative to the channel's URL; {digest} in it stands for the release's digest.")
            var url: String

            @Option(name: .customLong("delta"), help: "A delta to the release from an earlier one (packager delta OLD RELEASE), with --delta-url (repeatable).")
            var deltas: [String] = []

            @Option(name: .customLong("delta-url"), help: "Where the fleet reads the --delta at the same place (repeatable, in order).")
            var deltaURLs: [String] = []

            @Option(help: "The channel's current document: the new one takes the next version (without it, version 1).")
            var previous: String?

            @Option(help: "How long the document stays current: 7d, 12h, 30m (default 7d).")
            var expires = "7d"

            @Option(name: .customLong("sign-key"), help: "The release key: an Ed25519 private key file (default: $PACKAGER_SIGN_KEY, base64).")
            var signKey: String?

            @Option(name: .shortAndLong, help: "Where to write the document (it may be --previous: replaced once the new one is written).")
            var output: String

            func validate() throws {
                try refuseURLs([release] + deltas, command: "channel write")
                guard !url.trimmingCharacters(in: .whitespaces).isEmpty, !deltaURLs.contains(where: { $0.trimmingCharacters(in: .whitespaces).isEmpty }) else {
                    throw ValidationError("--url and --delta-url take where the fleet reads the object: a URL, or a path relative to the channel's")
                }
                guard deltas.count == deltaURLs.count else {
                    throw ValidationError("each --delta goes with a --delta-url (\(deltas.count) deltas, \(deltaURLs.count) URLs)")
                }
                guard Self.lifetime(expires) != nil else { throw ValidationError("--expires: '\(expires)' is not a duration (say 7d, 12h or 30m, up to 366d)") }
                try refuseOutput(output, over: [(release, "the release")] + deltas.map { ($0, "a delta") } + [(signKey, "the signing key")])
            }

            /// Seconds from `7d`, `12h`, `30m`, `90s`: more than 0, at most 366 days.
            static func lifetime(_ text: String) -> Double? {
                let units: [(String, Double)] = [("d", 86_400), ("h", 3600), ("m", 60), ("s", 1)]
                for (unit, scale) in units where text.hasSuffix(unit) {
                    guard let value = Double(text.dropLast(unit.count)), value > 0, value * scale <= 366 * 86_400 else { return nil }
                    return value * scale
                }
                return nil
            }

            func run() throws {
                try reportingErrors {
                    guard let key = try SigningKeys.privateKey(file: signKey, environment: "PACKAGER_SIGN_KEY") else {
                        throw PackagerError(
                            .invalidInput, "a channel document is signed: give --sign-key KEY (packager keygen writes one), or PACKAGER_SIGN_KEY")
                    }
                    let previousBytes = try previous.map { path -> [UInt8] in
                        guard let data = FileManager.default.contents(atPath: path) else { throw PackagerError(.invalidInput, "cannot read \(path)") }
                        return Array(data)
                    }
                    let (document, envelope) = try ChannelWriter.next(
                        release: release, url: url, deltas: zip(deltas, deltaURLs).map { ChannelWriter.DeltaFile(path: $0, url: $1) }, previous: previousBytes,
                        lifetime: Self.lifetime(expires) ?? 7 * 86_400, key: key)
                    try writeWhole(envelope, to: output)
                    print(
                        "wrote \(output): version \(document.version), release \(document.release.digest.prefix(12)) (\(formatBytes(document.release.size))) at \(document.release.url)"
                            + (document.deltas.isEmpty ? "" : ", \(document.deltas.count) delta\(document.deltas.count == 1 ? "" : "s")")
                            + "; expires \(document.expires)")
                }
            }

            /// Writes `bytes` beside `path`, then renames them over it: a reader never sees half a document.
            private func writeWhole(_ bytes: [UInt8], to path: String) throws {
                let temporary = path + ".tmp-\(getpid())"
                guard FileManager.default.createFile(atPath: temporary, contents: Data(bytes)) else {
                    throw PackagerError(.io, "cannot write \(temporary)")
                }
                guard rename(temporary, path) == 0 else {
                    let error = SystemCallError(errno)
                    unlink(temporary)
                    throw PackagerError(.io, "cannot write \(path)", cause: error)
                }
            }
        }
    }
}
