import ArgumentParser
import Foundation
import OfflineBundle
import PackagerKit

extension Packager {
    struct Keygen: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "keygen",
            abstract: "Write an Ed25519 key pair for signing bundles: PREFIX.key (private, mode 0600) and PREFIX.pub.",
            discussion: """
                Sign with packager build --sign-key PREFIX.key (or PACKAGER_SIGN_KEY in the environment); \
                services mount with the public key and refuse unsigned or tampered bundles; \
                packager check --public-key PREFIX.pub checks a bundle the same way.

                \(exitStatusHelp)
                """
        )

        @Option(name: [.short, .customLong("output")], help: "The prefix of the two files.")
        var output: String

        func run() throws {
            try reportingErrors {
                let paths = try SigningKeys.generate(prefix: output)
                let key = try BundlePublicKey(contentsOf: paths.publicKey)
                print("wrote \(paths.privateKey) (keep it secret) and \(paths.publicKey): key \(key.fingerprint)")
            }
        }
    }
}
