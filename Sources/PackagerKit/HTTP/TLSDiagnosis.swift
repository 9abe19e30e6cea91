import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import OfflineBundle

/// Why an HTTPS server's certificate was refused, read from the certificate itself.
///
/// BoringSSL reports every verification failure as one error (`CERTIFICATE_VERIFY_FAILED`). Once the crawl has met
/// it, one more connection, which checks nothing and sends no request, reads the certificate the server presents and
/// says what is wrong with it: expired (and when), not yet valid, self-signed, or signed by a CA this machine does not
/// trust (and which). The answer is kept per origin, so an origin is asked once.
actor TLSDiagnosis {
    private var answers: [HTTPOrigin: String] = [:]

    /// A sentence for why `origin`'s certificate is not trusted, or nil when the server cannot be reached again.
    func explain(_ origin: HTTPOrigin, timeout: TimeAmount = .seconds(5)) async -> String? {
        if let answer = answers[origin] { return answer }
        guard let certificate = await Self.peerCertificate(host: origin.host, port: origin.port, timeout: timeout) else { return nil }
        let answer = Self.explain(certificate, host: origin.host, now: Date())
        answers[origin] = answer
        return answer
    }

    /// What is wrong with `certificate`, presented by `host`, at `now`.
    static func explain(_ certificate: NIOSSLCertificate, host: String, now: Date) -> String {
        let notAfter = Date(timeIntervalSince1970: TimeInterval(certificate.notValidAfter))
        let notBefore = Date(timeIntervalSince1970: TimeInterval(certificate.notValidBefore))
        if notAfter < now {
            return "TLS: the certificate for \(host) expired on \(HTTPDates.iso8601(notAfter)) (the server must renew it)"
        }
        if notBefore > now {
            return "TLS: the certificate for \(host) is not valid until \(HTTPDates.iso8601(notBefore)) (is this machine's clock right?)"
        }
        func name(_ parts: [SSLCertificateName]) -> String {
            let common = parts.first { $0.type == .commonName }?.value
            return common.map { "CN=\($0)" } ?? parts.map(\.value).joined(separator: ", ")
        }
        if certificate.subjectName == certificate.issuerName {
            return "TLS: the certificate for \(host) is self-signed (\(name(certificate.subjectName))); trust it with tls.ca-file or --ca-file"
        }
        return "TLS: the certificate for \(host) is signed by \(name(certificate.issuerName)), a CA this machine does not trust; "
            + "add that CA with tls.ca-file or --ca-file"
    }

    /// The leaf certificate `host:port` presents, read during a handshake that is then abandoned.
    static func peerCertificate(host: String, port: Int, timeout: TimeAmount) async -> NIOSSLCertificate? {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.certificateVerification = .none
        guard let context = try? NIOSSLContext(configuration: configuration) else { return nil }
        let group = MultiThreadedEventLoopGroup.singleton
        let promise = group.next().makePromise(of: NIOSSLCertificate?.self)
        // The first answer wins: the certificate, a close, or the timeout (a promise is completed once).
        let done = NIOLockedValueBox(false)
        let found: @Sendable (NIOSSLCertificate?) -> Void = { certificate in
            if done.withLockedValue({ seen in
                defer { seen = true }
                return !seen
            }) {
                promise.succeed(certificate)
            }
        }
        let isAddress = host.hasPrefix("[") || host.split(separator: ".").allSatisfy { !$0.isEmpty && $0.allSatisfy(\.isNumber) }
        let name = host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host
        let bootstrap = ClientBootstrap(group: group)
            .connectTimeout(timeout)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let handler = try NIOSSLClientHandler(
                        context: context, serverHostname: isAddress ? nil : name,
                        customVerificationCallback: { certificates, verdict in
                            found(certificates.first)
                            // Nothing is sent: the handshake ends here.
                            verdict.succeed(.failed)
                        })
                    try channel.pipeline.syncOperations.addHandler(handler)
                }
            }
        do {
            let channel = try await bootstrap.connect(host: name, port: port).get()
            channel.eventLoop.scheduleTask(in: timeout) { found(nil) }
            channel.closeFuture.whenComplete { _ in found(nil) }
            let certificate = try await promise.futureResult.get()
            try? await channel.close()
            return certificate
        } catch {
            found(nil)
            return nil
        }
    }
}
