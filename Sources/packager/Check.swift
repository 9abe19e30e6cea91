import ArgumentParser
import Foundation
import OfflineBundle
import PackagerKit

extension Packager {
    struct Check: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check a bundle offline: every body's digest, the index against the manifest, the signature.",
            discussion: "Exits 0 when the bundle is intact, 1 with every problem listed when it is not."
        )

        @Argument(help: "The bundle to check.")
        var path: String

        @Option(name: .customLong("public-key"), help: "A file with the Ed25519 public key (32 raw bytes or base64) the bundle must be signed by.")
        var publicKey: String?

        @Flag(help: "Print JSON.")
        var json = false

        func run() throws {
            try reportingErrors {
                let key = try publicKey.map(readPublicKey)
                let report = Checker.check(path: path, publicKey: key)
                if json {
                    try printJSON(report)
                } else if report.isValid {
                    let signature =
                        switch (report.signatureValid, report.signerChecked) {
                        case (true?, true): ", signature valid (by the given public key)"
                        case (true?, false): ", signed, but the signer was not checked (give --public-key to check who signed it)"
                        default: ", unsigned"
                        }
                    print("ok: \(report.path): \(report.entries) entries, \(report.bodies) bodies, \(formatBytes(report.bytesVerified)) verified\(signature)")
                } else {
                    print("FAILED: \(report.path): \(report.issues.count) problem\(report.issues.count == 1 ? "" : "s")")
                    for issue in report.issues { print("  " + terminalSafe(issue.description)) }
                }
                if !report.isValid { throw ExitCode(1) }
            }
        }
    }
}
