import Foundation
import Hummingbird
import Logging
import Metrics
import NIOCore
import OfflineBundle
import Prometheus
import Synchronization

/// What `packager serve --admin-port` offers an operator, on a port of its own (never the one that serves the bundle):
/// `/metrics` in the Prometheus text format, `/healthz` (the process answers) and `/readyz` (a release is mounted and
/// the server is not shutting down).
///
/// The metrics are swift-metrics' (the runtime's counters: lookups, remote fetches, reloads) with swift-prometheus as
/// the backend, and the server's own, counted from the same record the access log writes, so the two agree:
/// `packager_http_requests_total{status, source, cached}`, `packager_http_response_bytes_total` (Content-Length) and
/// `packager_release_info{bundle, digest}` (1 for each bundle mounted now).
final class AdminEndpoints: Sendable {
    let registry = PrometheusCollectorRegistry()
    private let counters = Mutex<[String: Prometheus.Counter]>([:])
    private let bytes: Prometheus.Counter
    private let releases = Mutex<[Prometheus.Gauge]>([])
    /// Set once SIGTERM or SIGINT asked for a graceful shutdown: `/readyz` answers 503 from then on.
    let stopping = Atomic<Bool>(false)

    /// Makes the registry swift-metrics' backend for the process: call before anything creates a metric.
    init() {
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        bytes = registry.makeCounter(
            descriptor: .init(metricName: "packager_http_response_bytes", unitName: "total", helpText: "Bytes of the answers' bodies, by Content-Length."),
            labels: [])
    }

    /// Counts one answered request, from the record the access log writes.
    func record(_ served: ServedRequest) {
        let source = served.source?.description ?? "none"
        counter(
            "\(served.status) \(served.fromCache) \(source)", "packager_http_requests",
            help: "Requests answered, by status, by what answered, and whether from the cache of whole answers.",
            labels: [("status", String(served.status)), ("source", source), ("cached", served.fromCache ? "true" : "false")]
        ).increment()
        if let length = served.contentLength.flatMap({ Int64($0) }) { bytes.increment(by: length) }
        if let miss = served.miss {
            counter(
                "miss \(miss.kind.rawValue)", "packager_http_misses",
                help: "Requests the bundles did not answer, by what differed from the nearest recorded request (path: nothing recorded there).",
                labels: [("kind", miss.kind.rawValue)]
            ).increment()
        }
    }

    /// The counter kept under `key`, made on its first use.
    private func counter(_ key: String, _ name: String, help: String, labels: [(String, String)]) -> Prometheus.Counter {
        counters.withLock { counters in
            if let known = counters[key] { return known }
            let made = registry.makeCounter(descriptor: .init(metricName: name, unitName: "total", helpText: help), labels: labels)
            counters[key] = made
            return made
        }
    }

    /// Says which bundles answer now (at start and after each reload).
    func mounted(_ loader: OfflineLoader) {
        releases.withLock { gauges in
            for gauge in gauges { registry.unregisterGauge(gauge) }
            gauges = loader.bundles.map { bundle in
                let gauge = registry.makeGauge(
                    descriptor: .init(metricName: "packager_release", unitName: "info", helpText: "1 for each bundle mounted now, by its name and SHA-256."),
                    labels: [("bundle", bundle.label), ("digest", bundle.digest)])
                gauge.set(to: 1.0)
                return gauge
            }
        }
    }

    /// The admin server, on `host`:`port`; `running` is told the port it listens on.
    func application(host: String, port: Int, handle: LoaderHandle, logger: Logger, running: @escaping @Sendable (Int) -> Void)
        -> some ApplicationProtocol
    {
        let router = Router()
        router.get("/metrics") { _, _ -> Response in
            Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(bytes: self.registry.emitToBuffer())))
        }
        router.get("/healthz") { _, _ -> Response in
            Response(status: .ok, headers: [.contentType: "text/plain"], body: .init(byteBuffer: ByteBuffer(string: "ok\n")))
        }
        router.get("/readyz") { _, _ -> Response in
            let bundles = handle.loader.bundles
            let ready = !bundles.isEmpty && !self.stopping.load(ordering: .relaxed)
            let text =
                self.stopping.load(ordering: .relaxed)
                ? "shutting down\n" : bundles.map { "\($0.label) sha256:\($0.digest)\n" }.joined()
            return Response(
                status: ready ? .ok : .serviceUnavailable, headers: [.contentType: "text/plain"],
                body: .init(byteBuffer: ByteBuffer(string: text.isEmpty ? "no release mounted\n" : text)))
        }
        return Application(
            router: router, configuration: .init(address: .hostname(host, port: port), serverName: "packager-admin"),
            onServerRunning: { channel in running(channel.localAddress?.port ?? port) }, logger: logger)
    }
}

/// `packager serve`'s own lines (serving, reloaded, scrubbed, not reloaded), as text or, with `--log-format json`, as
/// one JSON object a line: `time`, `level`, `event`, `message` and the event's fields. Information goes to standard
/// output, warnings to standard error.
struct EventLog: Sendable {
    var json = false

    func info(_ event: String, _ message: String, _ fields: [(String, String)] = []) {
        FileHandle.standardOutput.write(Data(line("info", event, message, fields).utf8))
    }

    func warning(_ event: String, _ message: String, _ fields: [(String, String)] = []) {
        FileHandle.standardError.write(Data(line("warning", event, message, fields).utf8))
    }

    /// Text: `message` as it is (a warning after `packager: `), with a newline.
    func line(_ level: String, _ event: String, _ message: String, _ fields: [(String, String)]) -> String {
        guard json else { return (level == "warning" ? "packager: " : "") + message + (message.hasSuffix("\n") ? "" : "\n") }
        let time = HTTPDates.iso8601(Date())
        let all = [("time", time), ("level", level), ("event", event), ("message", message.trimmingCharacters(in: .newlines))] + fields
        return "{" + all.map { "\(ServedRequest.jsonString($0.0)):\(ServedRequest.jsonString($0.1))" }.joined(separator: ",") + "}\n"
    }
}
