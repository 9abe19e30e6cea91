// The benchmark behind `make bench`: packing and mounting, side by side with bsdtar.
//
// Usage: packager-bench PACKAGER_BINARY WORK_FOLDER REPORT.md [--quick]
import Foundation
import OfflineBundle
import OfflineBundleHTTPClient

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

let arguments = CommandLine.arguments
// `packager-bench --mount BUNDLE [N]`: mounts BUNDLE N times and prints the median, for profiling the mount alone.
if arguments.count >= 3, arguments[1] == "--mount" {
    var times = [Double]()
    for _ in 0..<(arguments.count > 3 ? Int(arguments[3]) ?? 50 : 50) {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        let start = Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
        _ = try MountedBundle(path: arguments[2])
        clock_gettime(CLOCK_MONOTONIC, &ts)
        times.append(Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9 - start)
    }
    times.sort()
    print(String(format: "median mount %.2f ms", times[times.count / 2] * 1000))
    exit(0)
}
// `packager-bench --delta-lookups NEW DELTA OLD`: lookups and whole-body reads per second through NEW alone and through
// DELTA mounted over OLD, alternated, best of three each; prints one line for scripts/bench-delta.sh.
if arguments.count >= 5, arguments[1] == "--delta-lookups" {
    let new = try MountedBundle(path: arguments[2])
    let delta = try MountedBundle(deltaPath: arguments[3], base: try MountedBundle(path: arguments[4]))
    let keys = new.entries.map(\.key)
    func rate(_ bundle: MountedBundle, bodies: Bool) throws -> Double {
        let count = bodies ? 200_000 : 1_000_000
        var found = 0
        let start = now()
        for i in 0..<count {
            guard let entry = bundle.entry(for: keys[i % keys.count]) else { continue }
            if bodies { found += try bundle.body(of: entry).count > 0 ? 1 : 1 } else { found += 1 }
        }
        precondition(found == count, "lookups missed")
        return Double(count) / (now() - start)
    }
    var best: [String: Double] = [:]
    for _ in 0..<3 {
        for (name, bundle, bodies) in [("new", new, false), ("delta", delta, false), ("new-bodies", new, true), ("delta-bodies", delta, true)] {
            best[name] = max(best[name] ?? 0, try rate(bundle, bodies: bodies))
        }
    }
    print(String(format: "%.0f %.0f %.0f %.0f", best["new"]!, best["delta"]!, best["new-bodies"]!, best["delta-bodies"]!))
    exit(0)
}
// `packager-bench --remote URL CACHE|- FRACTION`: mounts URL by range reads (CACHE a cache folder, or - for none),
// reads one page's body, then a FRACTION of the bundle's HTML pages spread over it; prints one line for
// scripts/bench-remote.sh: mount seconds, requests and bytes of the mount, index.bin's size, the object's size, the
// first page's seconds, then requests and bytes after the pages, and the pages read.
if arguments.count >= 5, arguments[1] == "--remote" {
    let transport = try HTTPClientRemoteTransport()
    let remote = RemoteOptions(transport: transport, cacheDirectory: arguments[3] == "-" ? nil : arguments[3])
    let start = now()
    let bundle = try MountedBundle(url: arguments[2], remote: remote)
    let mounted = now() - start
    let afterMount = bundle.remoteTraffic!
    let pages = bundle.entries.filter { $0.key.hasSuffix(".html") && $0.body != nil }.map(\.key).sorted()
    let first = pages[pages.count / 2]
    let firstStart = now()
    _ = try bundle.body(of: bundle.entry(for: first)!)
    let firstTime = now() - firstStart
    let fraction = Double(arguments[4]) ?? 0.01
    let stride = max(1, Int((1 / fraction).rounded()))
    var read = 1
    for (i, key) in pages.enumerated() where i % stride == 0 && key != first {
        _ = try bundle.body(of: bundle.entry(for: key)!)
        read += 1
    }
    let after = bundle.remoteTraffic!
    let indexBytes = bundle.metadata["index.bin"]!.compressedSize
    print(
        String(
            format: "%.4f %d %llu %llu %llu %.4f %d %llu %d", mounted, afterMount.requests, afterMount.bytes, indexBytes, bundle.file.size, firstTime,
            after.requests, after.bytes, read))
    exit(0)
}
guard arguments.count >= 4 else {
    print("usage: packager-bench PACKAGER_BINARY WORK_FOLDER REPORT.md [--quick]")
    exit(2)
}
let packager = arguments[1]
let work = arguments[2]
let reportPath = arguments[3]
let quick = arguments.contains("--quick")
let fm = FileManager.default

func now() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

func residentBytes() -> UInt64 {
    guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
    let fields = text.split(separator: " ")
    return (UInt64(fields[1]) ?? 0) * UInt64(sysconf(Int32(_SC_PAGESIZE)))
}

@discardableResult
func shell(_ command: String) -> (seconds: Double, status: Int32) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/sh")
    process.arguments = ["-c", command]
    process.standardOutput = FileHandle.nullDevice
    let start = now()
    try! process.run()
    process.waitUntilExit()
    return (now() - start, process.terminationStatus)
}

func best(of runs: Int, _ command: String) -> Double {
    var times = [Double]()
    for _ in 0..<runs {
        let r = shell(command)
        guard r.status == 0 else { fatalError("failed: \(command)") }
        times.append(r.seconds)
    }
    return times.min()!
}

func fileSize(_ path: String) -> UInt64 { (try? fm.attributesOfItem(atPath: path)[.size] as? UInt64) ?? 0 }

/// Deterministic words, so text compresses like text.
func text(_ n: Int, seed: Int) -> Data {
    let words = [
        "forecast", "pressure", "humidity", "the", "of", "and", "wind", "radar", "station", "api", "request", "cache", "offline", "bundle", "service",
        "response", "<p>", "</p>", "<div class=\"card\">", "</div>",
    ]
    var out = ""
    var state = UInt64(seed) &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
    while out.utf8.count < n {
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        out += words[Int(state >> 33) % words.count] + " "
    }
    return Data(out.utf8.prefix(n))
}

func noise(_ n: Int, seed: Int) -> Data {
    var state = UInt64(seed) &+ 0x9E37_79B9_7F4A_7C15
    var data = Data(count: n)
    data.withUnsafeMutableBytes { raw in
        let words = raw.bindMemory(to: UInt64.self)
        for i in 0..<words.count {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            words[i] = state
        }
    }
    return data
}

/// Site of many small files: HTML, CSS, JS, JSON, and some small images.
func makeSmallSite(_ root: String, count: Int) throws {
    if fm.fileExists(atPath: root + "/.complete-\(count)") { return }
    try? fm.removeItem(atPath: root)
    for i in 0..<count {
        let folder = root + "/section-\(i / 1000)"
        if i % 1000 == 0 { try fm.createDirectory(atPath: folder, withIntermediateDirectories: true) }
        let kind = i % 10
        let (name, data): (String, Data) =
            kind < 6
            ? ("page-\(i).html", text(800 + (i * 37) % 1500, seed: i))
            : kind < 8
                ? ("style-\(i).css", text(500 + (i * 13) % 800, seed: i))
                : kind == 8
                    ? ("data-\(i).json", text(300 + (i * 7) % 600, seed: i))
                    : ("thumb-\(i).png", noise(600 + (i * 11) % 1200, seed: i))
        try data.write(to: URL(fileURLWithPath: folder + "/" + name))
    }
    _ = fm.createFile(atPath: root + "/.complete-\(count)", contents: nil)
}

/// Site of large files: half photos (incompressible), half text.
func makeLargeSite(_ root: String, count: Int, size: Int) throws {
    if fm.fileExists(atPath: root + "/.complete-\(count)") { return }
    try? fm.removeItem(atPath: root)
    try fm.createDirectory(atPath: root + "/media", withIntermediateDirectories: true)
    for i in 0..<count {
        let data = i % 2 == 0 ? noise(size, seed: i) : text(size, seed: i)
        try data.write(to: URL(fileURLWithPath: root + "/media/file-\(i)" + (i % 2 == 0 ? ".jpg" : ".html")))
    }
    _ = fm.createFile(atPath: root + "/.complete-\(count)", contents: nil)
}

struct Row {
    var name: String
    var ours: String
    var peer: String
    var ratio: String
    var target: String
}
var rows = [Row]()
var notes = [String]()

@MainActor
func measureSite(label: String, root: String, files: Int, mountTarget: Double?) throws {
    let bundle = work + "/\(label).bundle.zip"
    let peerZip = work + "/\(label).bsdtar.zip"
    try? fm.removeItem(atPath: peerZip)
    let runs = quick ? 1 : 3
    // Warm the page cache so both tools read from memory.
    shell("cat $(find '\(root)' -type f | head -200000) > /dev/null 2>&1; true")
    let packTime = best(of: runs, "'\(packager)' pack '\(root)' --base-url https://bench.example/ -o '\(bundle)'")
    let peerTime = best(of: runs, "rm -f '\(peerZip)' && cd '\(root)' && bsdtar -a -cf '\(peerZip)' .")
    let ours = fileSize(bundle)
    let peer = fileSize(peerZip)
    // libarchive with one method for every entry, the other way to write a bundle with it.
    let storeZip = work + "/\(label).bsdtar-store.zip"
    let storeTime = best(of: runs, "rm -f '\(storeZip)' && cd '\(root)' && bsdtar --options zip:compression=store -a -cf '\(storeZip)' .")
    notes.append(
        "\(label): libarchive storing every entry (one method for all, no per-entry choice) takes " + String(format: "%.2f s", storeTime)
            + " and writes \(fileSize(storeZip) / 1024) KiB (" + String(format: "%.2fx", Double(fileSize(storeZip)) / Double(ours)) + " packager's size).")
    try? fm.removeItem(atPath: storeZip)
    // Where the bytes go, in both files (scripts/zip-breakdown.py, beside this package's sources).
    let breakdownScript = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../scripts/zip-breakdown.py").path
    let breakdownOut = work + "/\(label).breakdown.txt"
    if shell("python3 '\(breakdownScript)' '\(bundle)' '\(peerZip)' > '\(breakdownOut)'").status == 0,
        let said = try? String(contentsOfFile: breakdownOut, encoding: .utf8)
    {
        notes.append("\(label): where the bytes go: " + said.trimmingCharacters(in: .whitespacesAndNewlines))
    }
    rows.append(
        Row(
            name: "\(label): pack \(files) files", ours: String(format: "%.2f s", packTime), peer: String(format: "bsdtar -a -cf: %.2f s", peerTime),
            ratio: String(format: "%.2fx time", packTime / peerTime), target: "<= 0.7x"))
    rows.append(
        Row(
            name: "\(label): output size", ours: "\(ours / 1024) KiB", peer: "\(peer / 1024) KiB",
            ratio: String(format: "%.3fx size", Double(ours) / Double(peer)), target: "<= 1.0x"))

    // Mount: median of repeated mounts, in process.
    func medianMount(_ path: String) throws -> (seconds: Double, bundle: MountedBundle) {
        var mounts = [Double]()
        var mounted: MountedBundle?
        for _ in 0..<(quick ? 3 : 11) {
            let start = now()
            mounted = try MountedBundle(path: path)
            mounts.append(now() - start)
        }
        mounts.sort()
        return (mounts[mounts.count / 2], mounted!)
    }
    let rssBefore = residentBytes()
    let (mount, bundleHandle) = try medianMount(bundle)
    let rssAfter = residentBytes()
    let keys = bundleHandle.entries.prefix(100_000).map(\.key)
    // First lookup on a fresh mount.
    let fresh = try MountedBundle(path: bundle)
    let firstStart = now()
    let firstEntry = fresh.entry(for: keys[keys.count / 2])
    let firstBody = try fresh.body(of: firstEntry!)
    let firstLatency = now() - firstStart
    _ = firstBody
    // Lookups per second from URL strings, one core.
    let urls = keys.map { $0.replacingOccurrences(of: "https://bench.example/", with: "https://BENCH.example:443/") }
    let lookups = quick ? 200_000 : 1_000_000
    var found = 0
    let lookupStart = now()
    for i in 0..<lookups where bundleHandle.entry(for: urls[i % urls.count]) != nil { found += 1 }
    let perSecond = Double(lookups) / (now() - lookupStart)
    precondition(found == lookups, "lookups missed")

    let extractFolder = work + "/\(label)-extract"
    let extract = best(of: runs, "rm -rf '\(extractFolder)' && mkdir -p '\(extractFolder)' && bsdtar -xf '\(bundle)' -C '\(extractFolder)'")
    try? fm.removeItem(atPath: extractFolder)
    rows.append(
        Row(
            name: "\(label): mount (index only)", ours: String(format: "%.2f ms", mount * 1000), peer: String(format: "bsdtar -xf: %.0f ms", extract * 1000),
            ratio: String(format: "%.4fx time", mount / extract), target: mountTarget.map { String(format: "< %.0f ms", $0) } ?? "-"))
    if let mountTarget {
        // The same bundle with index.bin stored (pack --stored-index): what a mount costs without inflating it.
        let storedBundle = work + "/\(label).stored-index.zip"
        guard shell("'\(packager)' pack '\(root)' --base-url https://bench.example/ -o '\(storedBundle)' --stored-index > /dev/null").status == 0 else {
            fatalError("pack --stored-index failed")
        }
        let storedMount = try medianMount(storedBundle).seconds
        rows.append(
            Row(
                name: "\(label): mount, index.bin stored (pack --stored-index, \(fileSize(storedBundle) / 1024) KiB)",
                ours: String(format: "%.2f ms", storedMount * 1000), peer: String(format: "index.bin deflated: %.2f ms", mount * 1000),
                ratio: String(format: "%.2fx time", storedMount / mount), target: String(format: "< %.0f ms", mountTarget)))
        try? fm.removeItem(atPath: storedBundle)
    }
    rows.append(Row(name: "\(label): first lookup + body read", ours: String(format: "%.3f ms", firstLatency * 1000), peer: "-", ratio: "-", target: "-"))
    rows.append(Row(name: "\(label): lookups/s from a URL string, 1 core", ours: String(format: "%.0f", perSecond), peer: "-", ratio: "-", target: "> 500,000"))
    rows.append(
        Row(
            name: "\(label): resident memory added by mount", ours: "\((rssAfter > rssBefore ? rssAfter - rssBefore : 0) / 1024) KiB",
            peer: "bundle \(ours / 1024) KiB", ratio: String(format: "%.3fx", Double(rssAfter > rssBefore ? rssAfter - rssBefore : 0) / Double(ours)),
            target: "well under 1x"))
}

try fm.createDirectory(atPath: work, withIntermediateDirectories: true)
let smallCount = quick ? 10_000 : 100_000
let largeCount = quick ? 100 : 1_000
// `--requests-only`: the declared requests' rows alone (for profiling them).
let requestsOnly = arguments.contains("--requests-only") || arguments.contains("--canonical-only")
if !requestsOnly {
    print("generating sites in \(work) ...")
    try makeSmallSite(work + "/small-site", count: smallCount)
    try makeLargeSite(work + "/large-site", count: largeCount, size: 1 << 20)
    print("measuring \(smallCount) small files ...")
    try measureSite(label: "small", root: work + "/small-site", files: smallCount, mountTarget: 20)
    print("measuring \(largeCount) files of 1 MiB ...")
    try measureSite(label: "large", root: work + "/large-site", files: largeCount, mountTarget: nil)
}
// Real content: Debian's python3.11-doc HTML (make bench installs it), packed as a folder.
let pythonDocs = "/usr/share/doc/python3.11/html"
if requestsOnly {
} else if fm.fileExists(atPath: pythonDocs) {
    var files = 0
    let walker = fm.enumerator(atPath: pythonDocs)
    while let name = walker?.nextObject() as? String {
        if let type = walker?.fileAttributes?[.type] as? FileAttributeType, type == .typeRegular, !name.hasPrefix(".") { files += 1 }
    }
    print("measuring Debian's python3.11-doc HTML ...")
    try measureSite(label: "python-docs", root: pythonDocs, files: files, mountTarget: nil)
} else {
    notes.append("python-docs: \(pythonDocs) is not installed (apt-get install python3.11-doc); not measured.")
}

// Declared requests: a recording of 10,000 API calls packed from HAR, against the same bodies packed as files; and
// the cost of choosing among a URL's variants (by body, by Accept) against a plain GET lookup.
@MainActor
func measureRequests(count: Int) throws {
    let folder = work + "/requests"
    try? fm.removeItem(atPath: folder)
    try fm.createDirectory(atPath: folder + "/files", withIntermediateDirectories: true)
    let base = "https://api.bench.example"
    var entries: [String] = []
    entries.reserveCapacity(count)
    func json(_ text: String) -> String { String(decoding: try! JSONEncoder().encode(text), as: UTF8.self) }
    func entry(_ method: String, _ path: String, accept: String?, postData: String?, type: String, body: String) -> String {
        let headers = accept.map { "[{\"name\": \"Accept\", \"value\": \"\($0)\"}]" } ?? "[]"
        let vary = accept == nil ? "" : ", {\"name\": \"Vary\", \"value\": \"Accept\"}"
        let post = postData.map { ", \"postData\": {\"mimeType\": \"application/json\", \"text\": \(json($0))}" } ?? ""
        return "{\"startedDateTime\": \"2026-01-02T03:04:05Z\", \"time\": 1, \"request\": {\"method\": \"\(method)\", \"url\": \"\(base)\(path)\", "
            + "\"httpVersion\": \"HTTP/1.1\", \"headers\": \(headers), \"queryString\": [], \"cookies\": [], \"headersSize\": -1, \"bodySize\": 0\(post)}, "
            + "\"response\": {\"status\": 200, \"statusText\": \"OK\", \"httpVersion\": \"HTTP/1.1\", \"headers\": [{\"name\": \"Content-Type\", \"value\": \"\(type)\"}\(vary)], "
            + "\"cookies\": [], \"content\": {\"size\": \(body.utf8.count), \"mimeType\": \"\(type)\", \"text\": \(json(body))}, \"redirectURL\": \"\", "
            + "\"headersSize\": -1, \"bodySize\": -1}, \"cache\": {}, \"timings\": {\"send\": 0, \"wait\": 0, \"receive\": 0}}"
    }
    let groups = count / 4
    for i in 0..<groups {
        let rows = (0..<(8 + i % 24)).map { "{\"id\": \($0 + i * 100), \"name\": \"row \($0) of item \(i)\", \"score\": \(Double($0 * i % 997) / 10)}" }
        let itemJSON = "[" + rows.joined(separator: ", ") + "]"
        let itemCSV = "id,name\n" + (0..<(8 + i % 24)).map { "\($0 + i * 100),row \($0) of item \(i)" }.joined(separator: "\n")
        let hits = "{\"query\": \(i), \"hits\": [\(rows.prefix(5).joined(separator: ", "))]}"
        let page = "<!doctype html><title>page \(i)</title><p>" + String(repeating: "Lorem ipsum dolor sit amet \(i). ", count: 10 + i % 40)
        entries.append(entry("GET", "/items/\(i)", accept: "application/json", postData: nil, type: "application/json", body: itemJSON))
        entries.append(entry("GET", "/items/\(i)", accept: "text/csv", postData: nil, type: "text/csv", body: itemCSV))
        entries.append(entry("POST", "/search/\(i)", accept: nil, postData: "{\"q\": \(i)}", type: "application/json", body: hits))
        entries.append(entry("GET", "/pages/\(i).html", accept: nil, postData: nil, type: "text/html", body: page))
        // The same bodies as files, for pack's side of the comparison.
        try itemJSON.write(toFile: folder + "/files/items-\(i).json", atomically: false, encoding: .utf8)
        try itemCSV.write(toFile: folder + "/files/items-\(i).csv", atomically: false, encoding: .utf8)
        try hits.write(toFile: folder + "/files/search-\(i).json", atomically: false, encoding: .utf8)
        try page.write(toFile: folder + "/files/page-\(i).html", atomically: false, encoding: .utf8)
    }
    let har =
        "{\"log\": {\"version\": \"1.2\", \"creator\": {\"name\": \"bench\", \"version\": \"1\"}, \"entries\": [\n" + entries.joined(separator: ",\n")
        + "\n]}}\n"
    try har.write(toFile: folder + "/session.har", atomically: false, encoding: .utf8)
    let runs = quick ? 1 : 3
    shell("cat '\(folder)/session.har' '\(folder)'/files/* > /dev/null")
    let harTime = best(of: runs, "'\(packager)' pack --from-har '\(folder)/session.har' -o '\(folder)/har.zip'")
    let filesTime = best(of: runs, "'\(packager)' pack '\(folder)/files' --base-url \(base)/files/ -o '\(folder)/files.zip'")
    rows.append(
        Row(
            name: "requests: pack --from-har, \(groups * 4) recorded requests", ours: String(format: "%.2f s", harTime),
            peer: String(format: "pack of the same bodies as files: %.2f s", filesTime), ratio: String(format: "%.2fx time", harTime / filesTime),
            target: "<= 1.0x"))

    // Lookups: a plain GET in the files bundle (today's lookup) against each kind of request in the recorded one.
    let plain = try MountedBundle(path: folder + "/files.zip")
    let recorded = try MountedBundle(path: folder + "/har.zip")
    let lookups = quick ? 100_000 : 400_000
    func rate(_ requests: [BundleRequest], _ bundle: MountedBundle, plainURL: Bool) -> Double {
        var found = 0
        let start = now()
        for i in 0..<lookups {
            let request = requests[i % requests.count]
            if plainURL ? bundle.entry(for: request.url) != nil : bundle.entry(for: request) != nil { found += 1 }
        }
        precondition(found == lookups, "lookups missed")
        return Double(lookups) / (now() - start)
    }
    let plainRequests = (0..<groups).map { BundleRequest(url: "\(base)/files/page-\($0).html") }
    let kinds: [(String, [BundleRequest])] = [
        ("a plain GET among variants", (0..<groups).map { BundleRequest(url: "\(base)/pages/\($0).html") }),
        ("a POST chosen by its body", (0..<groups).map { BundleRequest(method: "POST", url: "\(base)/search/\($0)", body: Data("{\"q\": \($0)}".utf8)) }),
        (
            "a GET chosen by Accept (weights)",
            (0..<groups).map { BundleRequest(url: "\(base)/items/\($0)", headers: [.accept: "text/csv;q=0.5, application/json;q=0.9"]) }
        ),
    ]
    // `--profile-lookups N`: only kind N's lookups (0 the plain GET), for `perf record`.
    if let flag = arguments.firstIndex(of: "--profile-lookups"), flag + 1 < arguments.count, let kind = Int(arguments[flag + 1]) {
        let requests = kind == 0 ? plainRequests : kinds[kind - 1].1
        for _ in 0..<20 { _ = rate(requests, kind == 0 ? plain : recorded, plainURL: kind == 0) }
        exit(0)
    }
    for (name, requests) in kinds {
        // Alternated with the plain lookup, best of three each: the machine's noise hits both alike.
        var perSecond = 0.0
        var baseline = 0.0
        for _ in 0..<3 {
            baseline = max(baseline, rate(plainRequests, plain, plainURL: true))
            perSecond = max(perSecond, rate(requests, recorded, plainURL: false))
        }
        rows.append(
            Row(
                name: "requests: lookups/s, \(name)", ours: String(format: "%.0f", perSecond), peer: String(format: "plain GET lookup: %.0f", baseline),
                ratio: String(format: "%.2fx time", baseline / perSecond), target: "<= 1.2x"))
    }
}

// `--canonical-only`: only the canonical bodies (below), for profiling them.
let canonicalOnly = arguments.contains("--canonical-only")
if !canonicalOnly {
    print("measuring declared requests ...")
    try measureRequests(count: quick ? 4_000 : 10_000)
}

/// The dense JSON document the canonical rows measure: 40 objects of 4 members, short strings (about 2.8 KB).
func canonicalBenchJSON() -> [UInt8] {
    let rows = (0..<40).map { "{\"id\": \($0), \"name\": \"row \($0)\", \"tags\": [\"a\", \"b\"], \"score\": \(Double($0) / 8)}" }
    return Array(("{\"requestId\": \"r-1\", \"filter\": {\"country\": \"FR\", \"level\": 2}, \"rows\": [" + rows.joined(separator: ", ") + "]}").utf8)
}

// Canonical body matching (docs/FORMAT.md §5.5): the key's b= digest of a 4 KiB body under a json-body or graphql
// rule (parsed, written canonically, then digested), against the plain digest of the same bytes.
@MainActor
func measureCanonicalBodies() {
    let url = "https://api.bench.example/graphql"
    let json = Data(canonicalBenchJSON())
    let fields = (0..<60).map { "      field\($0)(arg: \\\"value \($0)\\\", n: \($0)) { id name }" }.joined(separator: "\\n")
    let graphql = Data(
        ("{\"operationName\": \"Q\", \"variables\": {\"wanted\": \"FR-75\", \"requestId\": \"r-1\"}, \"query\": \"query Q($wanted: String) {\\n  s(code: $wanted) {\\n"
            + fields + "\\n  }\\n}\"}").utf8)
    let kinds: [(String, BundleRules.BodyMatch.Form, Data)] = [("JSON body, json-body", .json, json), ("GraphQL request, graphql", .graphql, graphql)]
    for (name, form, body) in kinds {
        let rules = [BundleRules.jsonBodyRule(pattern: url, form: form, ignoring: ["/requestId", "/variables/requestId"])].compactMap(BundleRules.bodyMatch)
        precondition(BundleRules.bodyForMatching(rules, canonicalKey: url, body: body) != body, "the \(name) body was not canonicalized")
        let iterations = quick ? 5_000 : 20_000
        var plain = Double.infinity
        var canonical = Double.infinity
        // Alternated, best of three each: the machine's noise hits both alike.
        for _ in 0..<3 {
            var start = now()
            for _ in 0..<iterations { precondition(RequestQualifiers.bodyDigest(of: body) != nil) }
            plain = min(plain, (now() - start) / Double(iterations))
            start = now()
            for _ in 0..<iterations { precondition(RequestQualifiers.bodyDigest(of: BundleRules.bodyForMatching(rules, canonicalKey: url, body: body)) != nil) }
            canonical = min(canonical, (now() - start) / Double(iterations))
        }
        rows.append(
            Row(
                name: "requests: b= digest of a \(body.count / 1024) KiB \(name) canonical", ours: String(format: "%.1f µs", canonical * 1e6),
                peer: String(format: "plain digest of the bytes: %.1f µs", plain * 1e6), ratio: String(format: "%.2fx time", canonical / plain),
                target: "<= 2x"))
    }
}

print("measuring canonical bodies ...")
// `--canonical-only --profile-canonical`: only the parts below, many times over, for `perf record`.
let profileCanonical = arguments.contains("--profile-canonical")
if !profileCanonical { measureCanonicalBodies() }
if canonicalOnly {
    // The parts, for profiling: reading into nodes, then writing.
    let json = canonicalBenchJSON()
    var start = now()
    let loops = profileCanonical ? 200_000 : 20_000
    for _ in 0..<loops { precondition(CanonicalJSON.Document(json) != nil) }
    print(String(format: "read: %.2f µs", (now() - start) / Double(loops) * 1e6))
    let document = CanonicalJSON.Document(json)!
    start = now()
    for _ in 0..<loops { precondition(document.canonical() != nil) }
    print(String(format: "write: %.2f µs", (now() - start) / Double(loops) * 1e6))
}

var cpu = "unknown CPU"
if let info = try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8), let line = info.split(separator: "\n").first(where: { $0.hasPrefix("model name") })
{
    cpu = String(line.split(separator: ":", maxSplits: 1)[1]).trimmingCharacters(in: .whitespaces)
}
let date = ISO8601DateFormatter().string(from: Date())
var md = "## Bundle format: pack and mount\n\n"
md +=
    "Run by `make bench` (Sources/PackagerBench) on \(date), \(ProcessInfo.processInfo.activeProcessorCount) cores (\(cpu)), \(quick ? "quick mode (smaller sites)" : "full size").\n"
md += "Sites: \(smallCount) small files (60% HTML, 20% CSS, 10% JSON, 10% PNG-like noise), \(largeCount) files of 1 MiB (half JPEG-like noise, half text), "
md += "and Debian's python3.11-doc HTML as installed (real pages, images, scripts; its symbolic links are skipped by pack and stored as links by bsdtar). "
md += "Times are the best of \(quick ? 1 : 3) runs with a warm page cache; the peer runs in the same process tree right after packager.\n\n"
md += "| measure | packager | peer | ratio | target |\n|---|---|---|---|---|\n"
for r in rows { md += "| \(r.name) | \(r.ours) | \(r.peer) | \(r.ratio) | \(r.target) |\n" }
md += "\n"
for n in notes { md += "- \(n)\n" }
try md.write(toFile: reportPath, atomically: true, encoding: .utf8)
print(md)
