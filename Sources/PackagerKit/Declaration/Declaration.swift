import Foundation
import OfflineBundle

/// What `packager build` crawls and how: the model of a declaration file (`packager.yml`).
///
/// ``DeclarationParser`` reads it from YAML; `docs/DECLARATION.md` describes
/// every key. The quick run (`packager build --seed URL`) builds one from
/// flags with the defaults below.
public struct Declaration: Sendable, Equatable {
    /// Where the bundle is written, relative to ``baseDirectory`` unless absolute.
    public var output: String?
    /// What the parser found risky but not wrong (a credential written in the file rather than taken from the
    /// environment), each starting with the file and line: `build` prints them.
    public var warnings: [String] = []
    /// Pages to crawl from: fetched, then their requisites and in-scope links.
    public var seeds: [String] = []
    /// URLs fetched as they are, without following their links (their requisites are not fetched either).
    public var urls: [String] = []
    /// sitemap.xml files whose in-scope pages are crawled like seeds.
    public var sitemaps: [String] = []
    /// Requests sent as declared (an API's calls): method, headers, body, the status expected, pagination, volatile
    /// fields. Each response is kept under its request's key (docs/FORMAT.md §5.4).
    public var requests: [Request] = []

    /// One item of `requests:`.
    public struct Request: Sendable, Equatable {
        public var url: String
        /// Uppercase; `GET` by default.
        public var method = "GET"
        /// Headers sent with this request (besides, and over, the declaration's `headers` for its origin).
        public var headers: [Header] = []
        /// The body sent (`body` as text, `${NAME}` replaced from the environment, or the bytes of `body-file`).
        public var body: Data?
        /// Whether the body holds a secret (a `${NAME}` in `body`, or `secret: true`): the bundle keeps only its digest
        /// (the key's `b=`), never the bytes; verify and refresh take it from the declaration again.
        public var bodySecret = false
        /// The values `${NAME}` put into ``body``, searched for in answers as header secrets are.
        public var bodySecretParts: [String] = []
        /// The status the response must have (a 404 kept as a fixture); nil: any 2xx or 3xx.
        public var status: Int?
        /// Request headers (lowercase names) that choose this answer among the URL's, besides the response's `Vary`.
        public var vary: [String] = []
        /// How the next page is found, and how many pages at most.
        public var paginate = Pagination.link
        public var maxPages = 1_000
        /// JSON pointers (`*` for any one step) of fields that change on every answer: verify, refresh and diff leave
        /// them out.
        public var volatile: [String] = []
        /// How its body is matched (`match: {json-body: canonical}`), when not as sent; the rule covers its URL.
        public var match: BodyMatch?
        /// The line of the declaration it was written on, for messages.
        public var line = 0

        public init(url: String, method: String = "GET") {
            self.url = url
            self.method = method
        }
    }

    /// How a paged answer names its next page.
    public enum Pagination: Sendable, Equatable {
        /// As a manifest records it: `link`, `json:POINTER`, `header:NAME`; nil for none.
        public var word: String? {
            switch self {
            case .none: nil
            case .link: "link"
            case .json(let pointer): "json:" + pointer
            case .header(let name): "header:" + name
            }
        }

        /// From ``word``; nil for a word that names none.
        public init?(word: String) {
            if word == "link" {
                self = .link
            } else if word.hasPrefix("json:") {
                self = .json(String(word.dropFirst(5)))
            } else if word.hasPrefix("header:") {
                self = .header(String(word.dropFirst(7)))
            } else {
                return nil
            }
        }

        /// Not followed.
        case none
        /// `Link: <…>; rel="next"` (RFC 8288), the default.
        case link
        /// A JSON pointer to the next page's URL in the body (`/next_url`, `/links/next`); null or absent ends.
        case json(String)
        /// A response header holding the next page's URL (`Next-Page`).
        case header(String)
    }
    /// What the crawl may reach.
    public var scope = Scope()
    /// Whether robots.txt rules are obeyed.
    public var respectRobots = true
    /// Sent on every request; also the product token robots.txt groups are matched against.
    public var userAgent = "packager/\(PackagerVersion.string)"
    /// Request headers, with `${NAME}` already replaced from the environment.
    public var headers: [Header] = []
    /// How many requests run at once, in all and per host.
    public var concurrency = Concurrency()
    /// Timeouts, in seconds.
    public var timeouts = Timeouts()
    /// Retries on connection errors, 429 and 5xx.
    public var retries = Retries()
    /// Remote URLs (or URL prefixes) answered by local files instead of the network.
    public var substitutions: [Substitution] = []
    /// URL patterns answered with an empty response and never fetched.
    public var block: [String] = []
    /// Query parameter name patterns dropped from request keys (`utm_*`, `fbclid`).
    public var dropQueryParameters: [String] = []
    /// Pages also rendered in headless Chromium during the crawl, for what their scripts load.
    public var browser = Browser()

    /// The `browser:` section.
    public struct Browser: Sendable, Equatable {
        /// Whether each HTML page is also loaded in headless Chromium, every request it makes (and the links of its
        /// rendered DOM) fed to the crawl under the same scope, secret and robots rules.
        public var enabled = false
        /// Pages rendered at once.
        public var tabs = 2
        /// Seconds a page may take to load.
        public var pageTimeout: Double = 20
        /// Whether every page is rendered, or (the default) one page per set of scripts: pages that load the same
        /// scripts (a generator's pages, but for its search page) load the same things when they run.
        public var everyPage = false
        /// Whether the generic behaviours run on each page: scroll to the end, open `<details>`, focus and type into
        /// search boxes, click menu buttons.
        public var genericBehaviors = true
        /// The behaviours the declaration names, run in order on the pages they match, after the generic ones.
        public var behaviors: [Behavior] = []
        public init() {}
    }

    /// One step run in a rendered page (`browser.behaviors`), so that what a page loads only on use is loaded.
    public struct Behavior: Sendable, Equatable {
        /// A URL pattern (as `block`'s: `*` for any run of characters, compared without case); nil for every page.
        public var pages: String?
        public var action: Action

        public enum Action: Sendable, Equatable {
            /// Clicks each element the CSS selector matches (at most 20).
            case click(selector: String)
            /// Focuses each element the CSS selector matches (at most 5), sets its value to the text and sends the
            /// input, key and change events a user's typing would.
            case type(selector: String, text: String)
            /// Waits, in milliseconds (at most 10,000).
            case wait(milliseconds: Int)
            /// JavaScript evaluated in the page (a promise it gives is awaited, for at most the page timeout).
            case script(String)
        }

        public init(pages: String? = nil, action: Action) {
            self.pages = pages
            self.action = action
        }

        /// Whether the behaviour runs on the page at `url`.
        public func applies(to url: String) -> Bool {
            guard let pages else { return true }
            return globMatch(Array(pages.lowercased().utf8)[...], Array(url.lowercased().utf8)[...])
        }
    }

    /// Where the bundle answers a URL with a query no entry has by the entry without it, as a static server does
    /// (docs/FORMAT.md §4.6): learned per origin by the crawl (`auto`), nowhere, or for these URL patterns.
    public var ignoreQuery = IgnoreQuery.auto

    /// Where the origins ignore the query for stored files.
    public enum IgnoreQuery: Sendable, Equatable {
        /// Learned: an origin that answers one of its pages the same with and without a query, ignores it.
        case auto
        /// Nowhere: a query no entry has is a miss.
        case none
        /// For keys matching these patterns (as `block`'s), and nowhere else.
        case patterns([String])
    }
    /// Whether bodies sent with a Content-Encoding are stored decoded or as sent.
    public var contentEncoding = ContentEncodingPolicy.decoded
    /// Discovered resources that may fail before the build fails; nil for no limit. Declared URLs always count.
    public var maxErrors: Int?
    /// How HTTPS servers are trusted.
    public var tls = TLS()
    /// The folder relative paths (output, substitution files) are resolved against: the declaration's folder.
    public var baseDirectory: String = FileManager.default.currentDirectoryPath

    /// Creates an empty declaration with the defaults.
    public init() {}

    /// How request bodies are matched where a rule's URL pattern covers a request: `match:` at the top level, and each
    /// request's own (docs/DECLARATION.md, "Matching bodies").
    public var match: [BodyMatch] = []

    /// A `match` rule: bodies of requests to URLs `url` covers (`*` matches any run) are matched in their canonical
    /// form (JSON, GraphQL or a form), without the members `ignore` points at; the query parameters `ignoreParams`
    /// names are left out of those URLs' keys.
    public struct BodyMatch: Sendable, Equatable {
        public var url: String
        /// The canonical form: JSON (`json-body`, ``ignore`` holds JSON pointers), a GraphQL request (`graphql`,
        /// JSON pointers too) or a form (`form-body`, `application/x-www-form-urlencoded`, ``ignore`` holds parameter
        /// names); nil where the rule only names ``ignoreParams`` (bodies are then matched by their bytes).
        public var form: Form? = .json
        public var ignore: [String] = []
        /// Query parameter names (`*` matches any run) left out of the keys of the URLs `url` covers: cache-busting
        /// parameters (`_`, `t`), request ids. `url` is matched with the URL without its query.
        public var ignoreParams: [String] = []

        public enum Form: Sendable, Equatable { case json, graphql, form }

        public init(url: String, form: Form? = .json, ignore: [String] = [], ignoreParams: [String] = []) {
            self.url = url
            self.form = form
            self.ignore = ignore
            self.ignoreParams = ignoreParams
        }

        /// The rule as `match` lines of a bundle's rules (docs/FORMAT.md §4.6): one for the body, one for the query.
        /// `queryless` is the pattern the ignore-params line takes (a request's own rule: its URL without the query).
        func bundleLines(queryless: String? = nil) -> [String] {
            var lines: [String] = []
            switch form {
            case .json: lines.append(BundleRules.jsonBodyRule(pattern: url, ignoring: ignore))
            case .graphql: lines.append(BundleRules.jsonBodyRule(pattern: url, form: .graphql, ignoring: ignore))
            case .form: lines.append(BundleRules.formBodyRule(pattern: url, ignoring: ignore))
            case nil: break
            }
            if !ignoreParams.isEmpty { lines.append(BundleRules.ignoreParamsRule(pattern: queryless ?? url, names: ignoreParams)) }
            return lines
        }
    }

    /// The rules a bundle built from this declaration carries for the runtime: dropped query parameters, block patterns,
    /// the canonical keys and prefixes of the substitutions, and how requests are matched.
    public var bundleRules: BundleRules {
        let canonicalizer = RequestKeyCanonicalizer(dropQueryParameters: dropQueryParameters)
        var rules = BundleRules(dropQueryParameters: dropQueryParameters, block: block)
        // A request's own rule covers its URL, canonical (its query sorted, dropped parameters gone), as keys are; its
        // ignore-params, the URL without the query.
        let keys = RequestKeyCanonicalizer(dropQueryParameters: dropQueryParameters, formQuery: true)
        rules.match = match.flatMap { $0.bundleLines() }
        for request in requests {
            guard var own = request.match else { continue }
            let url = keys.canonicalize(request.url) ?? request.url
            own.url = url
            rules.match += own.bundleLines(queryless: url.firstIndex(of: "?").map { String(url[..<$0]) } ?? url)
        }
        if case .patterns(let patterns) = ignoreQuery { rules.ignoreQuery = patterns }
        for substitution in substitutions {
            switch substitution.match {
            case .url(let url, _): if let key = canonicalizer.canonicalize(url) { rules.substitutions.append(key) }
            case .prefix(let prefix, _): if let key = RequestKeyCanonicalizer().canonicalize(prefix) { rules.substitutionPrefixes.append(key) }
            }
        }
        return rules
    }

    /// The crawl's limits.
    public struct Scope: Sendable, Equatable {
        /// Origins whose URLs may be fetched: `https://host[:port]`, or `host`, `host:port`, `*.example.com` (https, and http
        /// where the declaration's own URLs use it); empty means the origins of the seeds, URLs and sitemaps.
        public var hosts: [String] = []
        /// When not empty, a discovered URL must match one of these patterns (`*` matches any run of characters).
        public var include: [String] = []
        /// Discovered URLs matching any of these patterns are not fetched.
        public var exclude: [String] = []
        /// Links followed from a seed at most this many times; nil for no limit. Page requisites do not count.
        public var maxDepth: Int?
        /// At most this many responses are fetched.
        public var maxResources = 100_000
        /// At most this many body bytes are fetched in all.
        public var maxBytes: Int64 = 4 << 30
        /// At most this many bytes in one body, as decoded (a gzip bomb of a few megabytes stops here): a longer body
        /// fails its URL.
        public var maxBody: Int64 = 256 << 20
        /// Whether page requisites (images, CSS, scripts) are fetched from hosts outside ``hosts``, as browsers would.
        public var requisitesFromAnyHost = false
        /// Whether followed links must stay below the folder of a seed (`wget --no-parent`); requisites may come from anywhere in scope.
        public var noParent = false
        public init() {}
    }

    /// One request header; ``secret`` when its value came from the environment.
    public struct Header: Sendable, Equatable {
        public var name: String
        public var value: String
        /// Values from `${NAME}` are secrets: never stored, never printed. So is a literal value of a header named as
        /// credentials are (``DeclarationParser/credentialLike(_:)``), which the parser warns about.
        public var secret: Bool
        /// The values the environment put into ``value``, searched for in responses so they are never stored.
        public var secretParts: [String]
        /// The origins (`https://host[:port]`) or host patterns (`host`, `*.example.com`, `host:port`) the header is
        /// sent to; empty means the origins of ``Declaration/seeds``, ``Declaration/urls``, ``Declaration/sitemaps`` and ``Declaration/requests``.
        public var origins: [String]

        public init(name: String, value: String, secret: Bool = false, secretParts: [String] = [], origins: [String] = []) {
            self.name = name
            self.value = value
            self.secret = secret
            self.secretParts = secretParts
            self.origins = origins
        }
    }

    /// How HTTPS servers are trusted.
    public struct TLS: Sendable, Equatable {
        /// PEM files of extra certificate authorities, trusted beside the system's (a company's own CA); relative paths
        /// resolve against the declaration's folder.
        public var caFiles: [String] = []
        /// Whether certificates are not checked at all (a throwaway staging server); never with a signing key.
        public var insecure = false
        /// A PEM certificate (and its chain) presented to origins that require mutual TLS.
        public var clientCertificate: String?
        /// The PEM private key of ``clientCertificate``; the file must not be readable by group or others.
        public var clientKey: String?
        /// The origins or host patterns the client certificate is presented to; empty means the origins of
        /// ``Declaration/seeds``, ``Declaration/urls``, ``Declaration/sitemaps`` and ``Declaration/requests`` (the same rule as headers).
        public var clientCertificateOrigins: [String] = []
        public init() {}
    }

    /// The most requests a build makes at once (each one a task and a connection): `concurrency` and `--concurrency`
    /// are refused above it.
    public static let maxConcurrency = 1024

    /// Limits on requests in flight.
    public struct Concurrency: Sendable, Equatable {
        public var total = 8
        public var perHost = 8
        public init() {}
    }

    /// Timeouts, in seconds.
    public struct Timeouts: Sendable, Equatable {
        /// To establish a connection.
        public var connect: Double = 10
        /// For a whole response, headers and body.
        public var request: Double = 60
        public init() {}
    }

    /// How failed requests are retried.
    public struct Retries: Sendable, Equatable {
        /// Attempts after the first one.
        public var attempts = 3
        /// The first backoff, in seconds; doubled each time, with jitter.
        public var backoff: Double = 0.5
        /// The longest wait, in seconds, whether from backoff or Retry-After.
        public var maxBackoff: Double = 30
        public init() {}
    }

    /// A URL, or every URL under a prefix, answered from local files.
    public struct Substitution: Sendable, Equatable {
        public enum Match: Sendable, Equatable {
            /// Exactly this URL, answered by a file.
            case url(String, file: String)
            /// Every URL starting with this prefix, answered by the file at the rest of its path in a folder.
            case prefix(String, folder: String)
        }
        public var match: Match
        /// The line in the declaration, for messages.
        public var line: Int?
        /// Where the declaration names the file or folder (`site.yml:12:11`), for messages.
        public var location: String?
        public init(_ match: Match, line: Int? = nil, location: String? = nil) {
            self.match = match
            self.line = line
            self.location = location
        }
    }

    /// Whether a body sent gzip- or deflate-encoded is stored decoded (and served as identity) or as sent.
    public enum ContentEncodingPolicy: String, Sendable, Equatable, CaseIterable {
        /// Decode before storing; the manifest says `identity` and the writer compresses by media type.
        case decoded
        /// Store the bytes as sent, with their Content-Encoding header; the manifest names the encoding.
        case encoded
    }

    /// What came from the environment, searched for and kept out of anything written: each secret header's whole
    /// value, and each environment value inside it (a server may echo the token without its `Bearer ` prefix), and
    /// each environment value put into a request body.
    /// Values shorter than 8 bytes are left out of the search, where they would match unrelated text; they are still
    /// never printed.
    public var secrets: [String] {
        var found: [String] = []
        for header in headers + requests.flatMap(\.headers) where header.secret {
            for text in [header.value] + header.secretParts where text.utf8.count >= 8 && !found.contains(text) { found.append(text) }
        }
        for text in requests.flatMap(\.bodySecretParts) where text.utf8.count >= 8 && !found.contains(text) { found.append(text) }
        return found
    }

    /// ``output`` resolved against ``baseDirectory``.
    public var outputPath: String? { output.map { resolve($0) } }

    /// A path from the declaration resolved against its folder.
    public func resolve(_ path: String) -> String {
        path.hasPrefix("/") ? path : (baseDirectory as NSString).appendingPathComponent(path)
    }

    /// Why a substitution cannot be used, or nil: each `file` must be a regular file and each `folder` a folder (the
    /// first that is not, with its line).
    func substitutionProblem() -> String? {
        for substitution in substitutions {
            let line = substitution.location.map { "\($0): " } ?? substitution.line.map { "line \($0) of the declaration: " } ?? ""
            var isFolder: ObjCBool = false
            switch substitution.match {
            case .url(let url, let file):
                let exists = FileManager.default.fileExists(atPath: resolve(file), isDirectory: &isFolder)
                if !exists || isFolder.boolValue {
                    return "\(line)the substitution file \(file) for \(url) does not exist or is not a file (looked for \(resolve(file)))"
                }
            case .prefix(let prefix, let folder):
                if !FileManager.default.fileExists(atPath: resolve(folder), isDirectory: &isFolder) || !isFolder.boolValue {
                    return "\(line)the substitution folder \(folder) for \(prefix) does not exist or is not a folder (looked for \(resolve(folder)))"
                }
            }
        }
        return nil
    }
}
