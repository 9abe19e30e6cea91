import Foundation
import OfflineBundle

/// What the crawl keeps out of the bundle: bodies that carry a secret, and answers fetched with credentials under keys
/// that say so.
extension Crawler {
    static let bodySecretReason = "its body carries a secret from the environment (a ${NAME} value of the declaration): not stored"

    /// Whether a received body carries one of the declaration's secret values as it is (letters in any case): read in
    /// 1 MiB pieces from a spool file, each with the end of the one before, so a secret across two pieces is found.
    static func bodyCarriesSecret(_ body: Fetcher.Body, scan: SecretScan) -> Bool {
        switch body {
        case .none:
            return false
        case .memory(let data):
            return scan.found(inBytes: data)
        case .file(let path):
            guard let handle = FileHandle(forReadingAtPath: path) else { return false }
            defer { try? handle.close() }
            let overlap = max(0, scan.longest - 1)
            var carried = Data()
            while let piece = try? handle.read(upToCount: 1 << 20), !piece.isEmpty {
                let window = carried + piece
                if scan.found(inBytes: window) { return true }
                carried = Data(window.suffix(overlap))
            }
            return false
        }
    }

    /// The request a crawled answer was fetched with, when the declaration's headers for its origin carry a credential
    /// (`Authorization`, `Proxy-Authorization`, `Cookie`): the answer is then keyed as a declared request's is (H19),
    /// by the credential's scheme (a cookie by its presence, whether or not the answer says it varies on it), so a
    /// request without one never gets it. nil when no credential went with it.
    func credentialed(_ url: String, responseHeaders: [(name: String, value: String)]) -> Swift.Result<RecordedRequest, Recorder.KeyProblem>? {
        let sent = fetcher.settings.headerRules.headers(forURL: url)
        let credentials = sent.map { $0.name.lowercased() }.filter { RequestQualifiers.credentialHeaders.contains($0) }
        guard !credentials.isEmpty else { return nil }
        let declaredHeaders = declaration.headers
        return Recorder.request(
            method: "GET", body: nil, sent: sent.map { (name: $0.name, value: $0.value) }, vary: Array(Set(credentials)).sorted(),
            responseHeaders: responseHeaders, secret: { name in declaredHeaders.contains { $0.name.lowercased() == name && $0.secret } }, scan: secretScan)
    }
}
