import Foundation
import NIOConcurrencyHelpers
import NIOSSL

/// How the build side trusts HTTPS servers: the system's roots, plus the declaration's `tls.ca-file`s (or
/// `--ca-file`), plus `SSL_CERT_FILE` and the certificates in `SSL_CERT_DIR` as curl and OpenSSL users expect (unless
/// they name the system's own file or folder, which are loaded already); or, with `tls.insecure`, nothing checked at all.
package struct TLSSettings: Sendable, Equatable {
    /// Absolute paths of PEM files whose certificates are trusted beside the system's.
    var caFiles: [String] = []
    var insecure = false
    /// A certificate presented to the origins it is declared for (mutual TLS), and to no other.
    var client: ClientCertificate?

    /// A client certificate, its key, and where it goes.
    struct ClientCertificate: Sendable, Equatable {
        /// Absolute paths of the PEM certificate (chain) and its PEM key.
        var certificate: String
        var key: String
        /// Origin patterns it is presented to; empty means ``declared``.
        var origins: [String]
        /// The declaration's own origins (of its seeds, URLs and sitemaps).
        var declared: [HTTPOrigin]

        /// Whether the certificate is presented to `origin`: an https origin the declaration names (or its
        /// `client-cert-origins` do). Never over plain http.
        func applies(to origin: HTTPOrigin) -> Bool {
            guard origin.isSecure else { return false }
            let isDeclared = declared.contains(origin)
            if origins.isEmpty { return isDeclared }
            return origins.compactMap { try? OriginPattern.parse($0).get() }.contains { $0.matches(origin, plainHTTPAllowed: false, declared: isDeclared) }
        }
    }

    /// No extra roots: the system's, and the environment's.
    static let system = TLSSettings()

    init(caFiles: [String] = [], insecure: Bool = false, client: ClientCertificate? = nil) {
        self.caFiles = caFiles
        self.insecure = insecure
        self.client = client
    }

    /// The settings a declaration gives (files resolved against its folder).
    init(_ declaration: Declaration) {
        let tls = declaration.tls
        var client: ClientCertificate?
        if let certificate = tls.clientCertificate, let key = tls.clientKey {
            client = ClientCertificate(
                certificate: declaration.resolve(certificate), key: declaration.resolve(key), origins: tls.clientCertificateOrigins,
                declared: declaration.declaredOrigins)
        }
        self.init(caFiles: tls.caFiles.map(declaration.resolve), insecure: tls.insecure, client: client)
    }

    /// The configuration for a request to `url`: with the client certificate when it goes to that origin, nil (the
    /// client's own, which presents none) otherwise.
    func requestConfiguration(forURL url: String) -> TLSConfiguration? {
        guard let client, let origin = HTTPOrigin(key: url) ?? HTTPOrigin(url: url), client.applies(to: origin) else { return nil }
        return clientConfiguration(client)
    }

    /// Configurations with a client certificate, built once per settings: building one reads the certificate, the
    /// key and every file of `SSL_CERT_DIR`, which a request must not do again.
    private static let built = NIOLockedValueBox([String: TLSConfiguration]())

    private func clientConfiguration(_ client: ClientCertificate) -> TLSConfiguration? {
        let cacheKey = ([client.certificate, client.key, String(insecure)] + caFiles).joined(separator: "\n")
        if let known = Self.built.withLockedValue({ $0[cacheKey] }) { return known }
        // The declaration was checked when it was parsed; a file changed since then fails here, and the request goes
        // without a certificate (the server then says it requires one).
        guard let chain = try? NIOSSLCertificate.fromPEMFile(client.certificate), !chain.isEmpty,
            let key = try? NIOSSLPrivateKey(file: client.key, format: .pem)
        else { return nil }
        var configuration = self.configuration()
        configuration.certificateChain = chain.map { .certificate($0) }
        configuration.privateKey = .privateKey(key)
        Self.built.withLockedValue { $0[cacheKey] = configuration }
        return configuration
    }

    /// Why a client certificate and key cannot be used, or nil: both must be PEM, and the key readable by its owner
    /// only, as ssh insists for its keys.
    package static func problem(withClientCertificate certificate: String, key: String) -> String? {
        if let problem = problem(withCAFile: certificate) { return problem.replacingOccurrences(of: "PEM certificate", with: "PEM client certificate") }
        var info = stat()
        guard stat(key, &info) == 0 else { return "cannot read the key \(key)" }
        if info.st_mode & 0o077 != 0 {
            return "the key \(key) is readable by others (mode \(String(info.st_mode & 0o777, radix: 8))); run chmod 600 on it"
        }
        guard (try? NIOSSLPrivateKey(file: key, format: .pem)) != nil else { return "\(key) holds no PEM private key that can be read" }
        return nil
    }

    /// The client configuration: extra roots added to the system's, never replacing them.
    func configuration(environment: [String: String] = ProcessInfo.processInfo.environment) -> TLSConfiguration {
        var configuration = TLSConfiguration.makeClientConfiguration()
        if insecure {
            configuration.certificateVerification = .none
            return configuration
        }
        var files = caFiles
        // The environment's roots, each parsed once here so that a damaged file is left out rather than failing every
        // HTTPS fetch; but not the system's own, which NIOSSL loads anyway (Debian's containers set SSL_CERT_FILE and
        // SSL_CERT_DIR to them: parsing their 280 certificates again took 10 ms of every command's start).
        let (systemFile, systemFolder) = Self.systemRoots
        if let file = environment["SSL_CERT_FILE"], !file.isEmpty, Self.resolved(file) != systemFile, Self.problem(withCAFile: file) == nil {
            files.append(file)
        }
        if let folder = environment["SSL_CERT_DIR"], !folder.isEmpty, Self.resolved(folder) != systemFolder {
            for entry in (try? FileManager.default.contentsOfDirectory(atPath: folder))?.sorted() ?? [] {
                let path = folder + "/" + entry
                if [".pem", ".crt", ".cer"].contains(where: entry.hasSuffix), Self.problem(withCAFile: path) == nil { files.append(path) }
            }
        }
        configuration.additionalTrustRoots = files.map { .file($0) }
        return configuration
    }

    /// The file and folder NIOSSL takes the system's roots from, resolved: on Linux the first of its search paths that
    /// exists, each (it loads both); elsewhere none (NIOSSL uses the platform's store, not these paths).
    private static let systemRoots: (file: String?, folder: String?) = {
        #if os(Linux)
            let file = ["/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt"].first { FileManager.default.fileExists(atPath: $0) }
            let folder = ["/etc/ssl/certs"].first { FileManager.default.fileExists(atPath: $0) }
            return (file.map(resolved), folder.map(resolved))
        #else
            return (nil, nil)
        #endif
    }()

    private static func resolved(_ path: String) -> String { URL(fileURLWithPath: path).resolvingSymlinksInPath().path }

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
