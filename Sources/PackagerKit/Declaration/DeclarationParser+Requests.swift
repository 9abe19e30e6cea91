import Foundation
import OfflineBundle
import Yams

/// `requests:` and `match:`: each declared request, how its body is matched, how its pages are followed, and the
/// check that no two of them would get one key.
extension DeclarationReader {
    /// One item of `requests:`: a URL (a GET), or a mapping.
    func request(_ node: Node) throws -> Declaration.Request {
        let line = node.mark?.line ?? 0
        if case .scalar = node {
            let url = try string(node, "a request")
            try checkURL(url, at: node, "requests item")
            var request = Declaration.Request(url: url)
            request.line = line
            return request
        }
        let keys = ["url", "method", "headers", "body", "body-file", "secret", "status", "vary", "paginate", "volatile", "match"]
        let pairs = try mapping(node, in: "a request", keys: keys)
        var values: [String: Node] = [:]
        for (key, value) in pairs { values[key.string ?? ""] = value }
        guard let urlNode = values["url"] else { throw fail(node, "a request needs a url") }
        let url = try string(urlNode, "a request's url")
        try checkURL(url, at: urlNode, "request url")
        var request = Declaration.Request(url: url)
        request.line = line
        if let methodNode = values["method"] {
            let method = try string(methodNode, "a request's method").uppercased()
            guard !method.isEmpty, method.count <= 32, method.utf8.allSatisfy({ $0 >= 0x41 && $0 <= 0x5A }) else {
                throw fail(methodNode, "'\(method)' is not an HTTP method (letters only, such as GET, POST, PUT, PATCH, DELETE)")
            }
            guard method != "HEAD" else { throw fail(methodNode, "a HEAD is answered from its GET: declare the GET") }
            guard method != "CONNECT" && method != "TRACE" else { throw fail(methodNode, "\(method) is not a request whose answer can be kept") }
            request.method = method
        }
        if let headersNode = values["headers"] {
            request.headers = try headers(headersNode)
            if let scoped = request.headers.first(where: { !$0.origins.isEmpty }) {
                throw fail(headersNode, "header '\(scoped.name)' of a request goes to its URL only: 'origins' is for the declaration's headers")
            }
        }
        if values["body"] != nil && values["body-file"] != nil { throw fail(node, "a request has a body or a body-file, not both") }
        if let bodyNode = values["body"] {
            let (expanded, parts) = try expand(try string(bodyNode, "a request's body"), at: bodyNode, inBody: true)
            request.body = Data(expanded.utf8)
            request.bodySecretParts = parts
            request.bodySecret = !parts.isEmpty
        }
        if let fileNode = values["body-file"] {
            let path = try string(fileNode, "a request's body-file")
            let resolved = path.hasPrefix("/") ? path : (baseDirectory as NSString).appendingPathComponent(path)
            guard let data = FileManager.default.contents(atPath: resolved) else { throw fail(fileNode, "cannot read the body-file '\(path)'") }
            request.body = data
        }
        if let secretNode = values["secret"], try bool(secretNode, "a request's secret") {
            guard request.body?.isEmpty == false else { throw fail(secretNode, "secret: true marks the request body as a secret, and this request has none") }
            request.bodySecret = true
        }
        // A body with a password-like field (as HAR import finds them) is a secret whether or not the declaration says
        // so: kept as its digest, and said.
        if !request.bodySecret, let body = request.body, let field = HARImporter.secretField(inBody: body),
            let bodyNode = values["body"] ?? values["body-file"]
        {
            request.bodySecret = true
            notes.warnings.append(
                "\(location(of: bodyNode) ?? file): the request body has a '\(field)' field written out: it is kept as its digest only, "
                    + "as a secret; write the value as ${NAME} (in body) and set NAME in the environment")
        }
        if let body = request.body, body.count > BundleRequest.maxBodySize {
            throw fail(
                values["body"] ?? values["body-file"],
                "the request body is \(body.count) bytes, over the \(BundleRequest.maxBodySize) bytes a bundle's readers match requests on")
        }
        if let statusNode = values["status"] {
            let status = try integer(statusNode, "a request's status", minimum: 200)
            guard status <= 599 else { throw fail(statusNode, "a request's status must be from 200 to 599") }
            request.status = status
        }
        if let varyNode = values["vary"] {
            for (i, item) in try items(varyNode, "vary", expected: "header names").enumerated() {
                let name = try string(item, "each item of vary").lowercased()
                guard RequestQualifiers.isKeyHeaderName(name) else { throw fail(item, "'\(name)' is not a header name") }
                guard name != "accept-encoding" else {
                    throw fail(item, "accept-encoding cannot choose an answer: every reader answers it itself (gzip or identity)")
                }
                if let secret = request.headers.first(where: { $0.name.lowercased() == name && $0.secret }),
                    !RequestQualifiers.credentialHeaders.contains(name)
                {
                    throw fail(item, "header '\(secret.name)' holds a secret: it cannot choose an answer, or the secret would be in the bundle's keys")
                }
                guard !request.vary.contains(name) else { throw fail(item, "'\(name)' is given twice in vary (item \(i + 1))") }
                request.vary.append(name)
            }
        }
        if let matchNode = values["match"] { request.match = try bodyMatch(matchNode, url: url) }
        if let paginateNode = values["paginate"] { (request.paginate, request.maxPages) = try paginate(paginateNode) }
        if let volatileNode = values["volatile"] {
            for item in try items(volatileNode, "volatile", expected: "JSON pointers") {
                let pointer = try string(item, "each item of volatile")
                if let problem = JSONPointer.problem(pointer) { throw fail(item, problem) }
                request.volatile.append(pointer)
            }
        }
        return request
    }

    /// A `match` rule: `{url: PATTERN, json-body: canonical, ignore: [POINTER, …]}`, `graphql: canonical` (pointers
    /// too) or `form-body: canonical` (`ignore` holds names), and or only, `ignore-params: [NAME, …]` (a request's own
    /// has no url: it is the request's).
    func bodyMatch(_ node: Node, url: String?) throws -> Declaration.BodyMatch {
        let forms = ["json-body", "graphql", "form-body"]
        let keys = (url == nil ? ["url"] : []) + forms + ["ignore", "ignore-params"]
        var values: [String: Node] = [:]
        for (key, value) in try mapping(node, in: "a match rule", keys: keys) { values[key.string ?? ""] = value }
        var rule = Declaration.BodyMatch(url: url ?? "", form: nil)
        if url == nil {
            guard let urlNode = values["url"] else { throw fail(node, "a match rule needs a url (a URL pattern: '*' matches any run)") }
            rule.url = try string(urlNode, "a match rule's url")
            guard !rule.url.contains(" "), !rule.url.isEmpty else { throw fail(urlNode, "a match rule's url is a URL pattern, without spaces") }
        }
        if let ignoreNode = values["ignore"], !forms.contains(where: { values[$0] != nil }) {
            throw fail(ignoreNode, "ignore names what a body form leaves out: give json-body, graphql or form-body")
        }
        let given = forms.filter { values[$0] != nil }
        if given.count > 1 { throw fail(node, "a match rule gives one of json-body, graphql and form-body, not \(given.joined(separator: " and "))") }
        if let formName = given.first, let formNode = values[formName] {
            let form = try string(formNode, formName)
            guard form == "canonical" else { throw fail(formNode, "\(formName) takes 'canonical', not '\(form)'") }
            rule.form = formName == "json-body" ? .json : formName == "graphql" ? .graphql : .form
        } else if values["ignore-params"] == nil {
            throw fail(
                node, "a match rule says how requests are matched: json-body: canonical, graphql: canonical, form-body: canonical, or ignore-params")
        }
        if let ignoreNode = values["ignore"] {
            let form = rule.form ?? .json
            for item in try items(ignoreNode, "ignore", expected: form == .form ? "parameter names" : "JSON pointers") {
                let ignored = try string(item, "each item of ignore")
                if form != .form, let problem = JSONPointer.problem(ignored) { throw fail(item, problem) }
                if form == .form, ignored.isEmpty { throw fail(item, "an ignored parameter needs a name") }
                rule.ignore.append(ignored)
            }
        }
        if let paramsNode = values["ignore-params"] {
            for item in try items(paramsNode, "ignore-params", expected: "query parameter names ('*' matches any run)") {
                let name = try string(item, "each item of ignore-params")
                guard !name.isEmpty, !name.contains(" ") else { throw fail(item, "an ignored query parameter is a name without spaces") }
                rule.ignoreParams.append(name)
            }
            if rule.ignoreParams.isEmpty { throw fail(paramsNode, "ignore-params names at least one query parameter") }
        }
        return rule
    }

    /// A body a `match` rule covers that is not of the rule's form (not JSON, a GraphQL query that does not read, a `%`
    /// without its digits) is matched by its bytes, as without the rule: said, with its line, so the rule is not
    /// thought to apply.
    func warnUnreadBodies(_ requests: [Declaration.Request], rules: BundleRules) {
        let matches = rules.match.compactMap(BundleRules.bodyMatch)
        guard !matches.isEmpty else { return }
        let canonicalizer = RequestKeyCanonicalizer(rules: rules, formQuery: true)
        for request in requests {
            guard let body = request.body, !body.isEmpty, let url = canonicalizer.canonicalize(request.url),
                let rule = BundleRules.bodyRule(matches, canonicalKey: url), rule.canonical(Array(body)) == nil
            else { continue }
            let form =
                switch rule.form {
                case .json: "one JSON document"
                case .graphql: "a GraphQL request whose query reads"
                case .form: "a form"
                }
            notes.warnings.append(
                "\(file):\(request.line): this request's body is not \(form), as its match rule (\(rule.form.rawValue)) reads bodies: "
                    + "it is matched by its bytes")
        }
    }

    /// `paginate`: `link`, `none`, or `{link: true | json: POINTER | header: NAME, max-pages: N}`.
    func paginate(_ node: Node) throws -> (Declaration.Pagination, Int) {
        if case .scalar(let scalar) = node {
            switch scalar.string {
            case "link": return (.link, 1_000)
            case "none", "false": return (.none, 1_000)
            default: throw fail(node, "paginate must be 'link', 'none', or a mapping with link, json or header (and max-pages)")
            }
        }
        var pagination: Declaration.Pagination?
        var maxPages = 1_000
        for (key, value) in try mapping(node, in: "paginate", keys: ["link", "json", "header", "max-pages"]) {
            let name = key.string ?? ""
            if name != "max-pages" && pagination != nil { throw fail(key, "paginate takes one of link, json and header") }
            switch name {
            case "link": pagination = try bool(value, "paginate.link") ? .link : Declaration.Pagination.none
            case "json":
                let pointer = try string(value, "paginate.json")
                if let problem = JSONPointer.problem(pointer) { throw fail(value, problem) }
                pagination = .json(pointer)
            case "header": pagination = .header(try string(value, "paginate.header").lowercased())
            default: maxPages = try integer(value, "paginate.max-pages", minimum: 1)
            }
        }
        return (pagination ?? .link, maxPages)
    }

    /// Two requests that are the same (method, URL, body and headers) are a mistake, named with both lines. (Two that
    /// differ only in headers neither `vary` nor the response's `Vary` names are found when the answers come.)
    /// Two requests that would get one key (the same method, URL, headers and body; a body in its canonical form
    /// where a `match` rule says so) are refused, naming both lines.
    func checkDistinct(_ requests: [Declaration.Request], rules: BundleRules) throws {
        let canonicalizer = RequestKeyCanonicalizer(rules: rules, formQuery: true)
        let plain = RequestKeyCanonicalizer(dropQueryParameters: rules.dropQueryParameters, formQuery: true)
        var seen: [String: (line: Int, url: String)] = [:]
        for request in requests {
            let values = request.headers.map { $0.name.lowercased() + "=" + $0.value }.sorted()
            let url = canonicalizer.canonicalize(request.url) ?? request.url
            let key = [request.method, url, rules.bodyDigest(canonicalKey: url, body: request.body) ?? ""] + values
            let joined = key.joined(separator: "\n")
            if let first = seen[joined] {
                let same = RequestQualifiers.bodyDigest(of: request.body) == nil || rules.bodyForMatching(canonicalKey: url, body: request.body) == request.body
                let query = plain.canonicalize(request.url) != url
                throw PackagerError(
                    .invalidInput,
                    "\(file):\(request.line): this request is the same as the one on line \(first.line) (\(request.method) \(request.url))"
                        + (same ? "" : ": their bodies are one document under the match rule")
                        + (query ? ": under the match rule's ignore-params its URL is \(first.url)'s" : ""))
            }
            seen[joined] = (request.line, request.url)
        }
    }
}
