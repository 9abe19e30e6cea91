import NIOSSL

/// HTTPS for ``OfflineBundleChannelServer``: a certificate chain and its private key, both
/// PEM files. The server then speaks HTTP/2 to clients that offer it by ALPN, and HTTP/1.1 to the others.
public struct ServerTLS: Sendable {
    /// A PEM file with the server's certificate first, then any intermediate certificates.
    public var certificateChain: String
    /// A PEM file with the certificate's private key.
    public var privateKey: String
    /// When set, a PEM file of CAs: every client must present a certificate signed by one (mutual TLS).
    public var clientCA: String?

    public init(certificateChain: String, privateKey: String, clientCA: String? = nil) {
        self.certificateChain = certificateChain
        self.privateKey = privateKey
        self.clientCA = clientCA
    }

    /// The server's TLS configuration, or an error that names the file and says what is wrong with it.
    package func configuration() throws -> TLSConfiguration {
        let chain: [NIOSSLCertificate]
        do {
            chain = try NIOSSLCertificate.fromPEMFile(certificateChain)
        } catch {
            throw TLSFileError(message: "\(certificateChain) holds no PEM certificate that can be read")
        }
        guard !chain.isEmpty else { throw TLSFileError(message: "\(certificateChain) holds no PEM certificate") }
        let key: NIOSSLPrivateKey
        do {
            key = try NIOSSLPrivateKey(file: privateKey, format: .pem)
        } catch {
            throw TLSFileError(message: "\(privateKey) holds no PEM private key that can be read")
        }
        var configuration = TLSConfiguration.makeServerConfiguration(certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(key))
        configuration.applicationProtocols = ["h2", "http/1.1"]
        if let clientCA {
            configuration.certificateVerification = .noHostnameVerification
            configuration.trustRoots = .file(clientCA)
        }
        return configuration
    }
}

/// A certificate or key file that cannot be used, in words.
public struct TLSFileError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}
