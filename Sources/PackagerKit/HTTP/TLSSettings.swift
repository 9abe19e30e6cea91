import Foundation
import NIOSSL

/// How the build side trusts HTTPS servers: the system's roots, plus the declaration's `tls.ca-file`s (or
/// `--ca-file`), plus `SSL_CERT_FILE` and the certificates in `SSL_CERT_DIR` as curl and OpenSSL users expect;
/// or, with `tls.insecure`, nothing checked at all.
package struct TLSSettings: Sendable, Equatable {
    /// Absolute paths of PEM files whose certificates are trusted beside the system's.
    var caFiles: [String] = []
    var insecure = false

    /// No extra roots: the system's, and the environment's.
    static let system = TLSSettings()

    init(caFiles: [String] = [], insecure: Bool = false) {
        self.caFiles = caFiles
        self.insecure = insecure
    }

    /// The settings a declaration gives (CA files resolved against its folder).
    init(_ declaration: Declaration) {
        self.init(caFiles: declaration.tls.caFiles.map(declaration.resolve), insecure: declaration.tls.insecure)
    }

    /// The client configuration: extra roots added to the system's, never replacing them.
    func configuration(environment: [String: String] = ProcessInfo.processInfo.environment) -> TLSConfiguration {
        var configuration = TLSConfiguration.makeClientConfiguration()
        if insecure {
            configuration.certificateVerification = .none
            return configuration
        }
        var files = caFiles
        if let file = environment["SSL_CERT_FILE"], !file.isEmpty, Self.problem(withCAFile: file) == nil { files.append(file) }
        if let folder = environment["SSL_CERT_DIR"], !folder.isEmpty {
            for entry in (try? FileManager.default.contentsOfDirectory(atPath: folder))?.sorted() ?? [] {
                let path = folder + "/" + entry
                if [".pem", ".crt", ".cer"].contains(where: entry.hasSuffix), Self.problem(withCAFile: path) == nil { files.append(path) }
            }
        }
        configuration.additionalTrustRoots = files.map { .file($0) }
        return configuration
    }

    /// Why `path` cannot serve as a CA file, or nil when it holds at least one PEM certificate.
    package static func problem(withCAFile path: String) -> String? {
        guard FileManager.default.isReadableFile(atPath: path) else { return "cannot read \(path)" }
        do {
            let certificates = try NIOSSLCertificate.fromPEMFile(path)
            return certificates.isEmpty ? "\(path) holds no PEM certificate" : nil
        } catch {
            return "\(path) holds no PEM certificate that can be read"
        }
    }
}
