import Foundation
import NIOConcurrencyHelpers

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`): commands go to the
/// browser's descriptor 3 and answers and events come from its descriptor 4, each a JSON message ended by a NUL byte.
/// No WebSocket, no Node: a pipe of the process's own.
///
/// Commands are answered by id; events go to the handler registered for their session (a page's, a frame's, a
/// worker's). When the browser exits or crashes, every command waiting fails, and later ones fail at once.
final class DevTools: Sendable {
    /// A command the browser refused or did not answer, or a browser that is gone.
    struct Failure: Error, CustomStringConvertible {
        var message: String
        var description: String { message }

        /// What the browser answers a command on a page that navigated itself away (or was closed) while it ran.
        static let navigatedAway = "Inspected target navigated or closed"
    }

    typealias EventHandler = @Sendable (_ method: String, _ params: JSONValue, _ session: String) -> Void

    private struct State {
        var nextId = 1
        var waiting: [Int: CheckedContinuation<JSONValue, any Error>] = [:]
        var handlers: [String: EventHandler] = [:]
        var gone: String?
    }

    /// The process started, leader of the browser's process group.
    let pid: pid_t
    private let commands: Int32
    private let state = NIOLockedValueBox(State())
    /// One message is written whole before the next: a pipe write past PIPE_BUF bytes is not atomic, and two
    /// interleaved would corrupt both.
    private let writing = NIOLock()

    /// The Chromium to run: `$PACKAGER_CHROMIUM`, else the first of chromium-headless-shell, chromium, google-chrome on
    /// the PATH (Debian's packages `chromium-headless-shell` and `chromium`); nil when there is none.
    static func findExecutable() -> String? {
        if let path = ProcessInfo.processInfo.environment["PACKAGER_CHROMIUM"], !path.isEmpty { return path }
        let folders = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":").map(String.init)
        for name in ["chromium-headless-shell", "chromium", "google-chrome"] {
            for folder in folders where access(folder + "/" + name, X_OK) == 0 { return folder + "/" + name }
        }
        return nil
    }

    /// How to get a browser, for an error message.
    static let installHint = "install Debian's chromium-headless-shell (apt-get install chromium-headless-shell), or set PACKAGER_CHROMIUM to a Chromium"

    /// The environment variable that runs the browser without its sandbox, for a machine where it cannot start one
    /// (a container without user namespaces): a renderer's bug is then a bug in a process of this user.
    static let noSandboxVariable = "PACKAGER_BROWSER_NO_SANDBOX"

    /// The unprivileged user a browser started by root runs as (Chromium refuses its sandbox to root): `nobody`.
    static let unprivilegedID: uid_t = 65534

    /// How the browser is confined, as a person reads it (for the build's report and errors).
    static var sandboxDescription: String {
        if ProcessInfo.processInfo.environment[noSandboxVariable].map({ !$0.isEmpty && $0 != "0" }) ?? false {
            return "without its sandbox (\(noSandboxVariable) is set)"
        }
        return geteuid() == 0 ? "in its sandbox, as the user nobody (started by root)" : "in its sandbox"
    }

    /// Starts `executable` headless with its profile in `profile` (a fresh folder), and its DevTools on a pipe.
    ///
    /// The browser runs in its own sandbox. Started by root, where Chromium refuses a sandbox, it runs as `nobody`
    /// (through util-linux's `setpriv`), with a profile of that user's in the temporary folder, removed at
    /// ``close()``. ``noSandboxVariable`` turns the sandbox off, for machines that cannot start one.
    ///
    /// - Parameter extraArguments: more switches (the proxy that every connection goes through, ``BrowserProxy``).
    static func launch(executable: String, profile: String, offline: Bool = false, extraArguments: [String] = []) throws -> DevTools {
        var toBrowser: [Int32] = [0, 0]
        var fromBrowser: [Int32] = [0, 0]
        // Run through setpriv, a missing browser would only show as one that exited: said here, before anything starts.
        guard access(executable, X_OK) == 0 else { throw Failure(message: "cannot start \(executable): \(String(cString: strerror(errno)))") }
        let sandboxed = !(ProcessInfo.processInfo.environment[noSandboxVariable].map { !$0.isEmpty && $0 != "0" } ?? false)
        let asNobody = sandboxed && geteuid() == 0
        var profile = profile
        var ownProfile: String?
        var command = [executable]
        if asNobody {
            guard access("/usr/bin/setpriv", X_OK) == 0 else {
                throw Failure(
                    message: "the browser would run as root, where Chromium has no sandbox, and util-linux's setpriv (to run it as nobody) is not "
                        + "installed; install util-linux, run packager as another user, or set \(noSandboxVariable)=1 to run it without a sandbox")
            }
            // A folder of nobody's own, where nobody can reach it: the scratch folder is root's alone (0700).
            var template = Array((NSTemporaryDirectory() + "/packager-browser-XXXXXX").utf8CString)
            guard let made = mkdtemp(&template) else { throw Failure(message: "cannot make a profile folder for the browser") }
            let folder = String(cString: made)
            guard chown(folder, unprivilegedID, gid_t(unprivilegedID)) == 0 else {
                rmdir(folder)
                throw Failure(message: "cannot give the browser's profile folder to nobody: \(String(cString: strerror(errno)))")
            }
            profile = folder
            ownProfile = folder
            command = [
                "/usr/bin/setpriv", "--reuid=\(unprivilegedID)", "--regid=\(unprivilegedID)", "--clear-groups", "--inh-caps=-all", "--", executable,
            ]
        }
        guard pipe(&toBrowser) == 0, pipe(&fromBrowser) == 0 else { throw Failure(message: "cannot make a pipe to the browser") }
        for fd in [toBrowser[1], fromBrowser[0]] { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        var arguments =
            command + [
                "--headless", "--remote-debugging-pipe", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
                "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-extensions", "--mute-audio",
                "--hide-scrollbars", "--disable-dev-shm-usage", "--user-data-dir=" + profile,
                // Pop-ups and new windows are not opened: what a page opens is not a page of the crawl.
                "--block-new-web-contents",
            ]
        if !sandboxed { arguments.append("--no-sandbox") }
        // Nothing reaches the network when the bundle alone answers: every name fails to resolve (and the proxy the
        // caller gives refuses every connection, to IP literals too).
        if offline { arguments.append("--host-resolver-rules=MAP * ~NOTFOUND") }
        arguments += extraArguments
        arguments.append("about:blank")
        // The browser's own files (~/.pki, caches) go in its profile, not in the caller's home.
        var environment = ProcessInfo.processInfo.environment
        if asNobody {
            environment["HOME"] = profile
            environment["XDG_CONFIG_HOME"] = profile + "/.config"
            environment["XDG_CACHE_HOME"] = profile + "/.cache"
        }
        let envp = environment.map { strdup($0.key + "=" + $0.value) } + [nil]
        defer { for pointer in envp { free(pointer) } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, toBrowser[0], 3)
        posix_spawn_file_actions_adddup2(&actions, fromBrowser[1], 4)
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        let argv = arguments.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        // Its own process group: Debian's chromium-headless-shell is a shell script that runs the browser as its child,
        // and the browser starts renderers of its own; ending the group ends them all.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP))
        posix_spawnattr_setpgroup(&attributes, 0)
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, command[0], &actions, &attributes, argv, envp)
        closeFD(toBrowser[0])
        closeFD(fromBrowser[1])
        guard spawned == 0 else {
            closeFD(toBrowser[1])
            closeFD(fromBrowser[0])
            if let ownProfile { try? FileManager.default.removeItem(atPath: ownProfile) }
            throw Failure(message: "cannot start \(executable): \(String(cString: strerror(spawned)))")
        }
        let browser = DevTools(pid: pid, commands: toBrowser[1], ownProfile: ownProfile)
        let events = fromBrowser[0]
        Thread.detachNewThread { browser.readMessages(from: events) }
        return browser
    }

    private init(pid: pid_t, commands: Int32, ownProfile: String?) {
        self.pid = pid
        self.commands = commands
        self.ownProfile = ownProfile
    }

    /// A profile folder made for the browser (when it runs as nobody), removed when it ends.
    private let ownProfile: String?

    /// Sends `method` with `params` (to `session`, or to the browser) and waits for its answer's result, at most
    /// `timeout` seconds.
    @discardableResult
    func send(_ method: String, _ params: JSONValue = [:], session: String? = nil, timeout: Double = 30) async throws -> JSONValue {
        try await withCheckedThrowingContinuation { continuation in
            let (id, gone) = state.withLockedValue { state -> (Int, String?) in
                if let gone = state.gone { return (0, gone) }
                let id = state.nextId
                state.nextId += 1
                state.waiting[id] = continuation
                return (id, nil)
            }
            if let gone { return continuation.resume(throwing: Failure(message: gone)) }
            var message: [String: JSONValue] = ["id": .number(Double(id)), "method": .string(method), "params": params]
            if let session { message["sessionId"] = .string(session) }
            guard var data = try? JSONSerialization.data(withJSONObject: JSONValue.object(message).any) else {
                return fail(id, Failure(message: "\(method): the command cannot be written as JSON"))
            }
            data.append(0)
            let written = writing.withLock {
                data.withUnsafeBytes { bytes -> Bool in
                    var offset = 0
                    while offset < bytes.count {
                        let n = write(commands, bytes.baseAddress! + offset, bytes.count - offset)
                        if n < 0 && errno == EINTR { continue }
                        guard n > 0 else { return false }
                        offset += n
                    }
                    return true
                }
            }
            if !written { return fail(id, Failure(message: "\(method): the browser is gone")) }
            DispatchQueue.global().asyncAfter(deadline: .now() + timeout) { [self] in
                fail(id, Failure(message: "\(method): no answer from the browser in \(Int(timeout)) s"))
            }
        }
    }

    private func fail(_ id: Int, _ error: any Error) {
        state.withLockedValue { $0.waiting.removeValue(forKey: id) }?.resume(throwing: error)
    }

    /// Events of `session` (the browser's own when empty) go to `handler` until ``removeHandler(session:)``.
    func setHandler(session: String, _ handler: @escaping EventHandler) { state.withLockedValue { $0.handlers[session] = handler } }

    func removeHandler(session: String) { state.withLockedValue { _ = $0.handlers.removeValue(forKey: session) } }

    /// Whether the browser is gone (exited, crashed, closed), and why.
    var gone: String? { state.withLockedValue { $0.gone } }

    /// Ends the browser (its whole process group) and waits for it.
    func close() {
        ended("the browser was closed")
        closeFD(commands)
        kill(-pid, SIGKILL)
        var status: Int32 = 0
        _ = waitpid(pid, &status, 0)
        if let ownProfile { try? FileManager.default.removeItem(atPath: ownProfile) }
    }

    private func ended(_ reason: String) {
        let waiting = state.withLockedValue { state -> [CheckedContinuation<JSONValue, any Error>] in
            if state.gone == nil { state.gone = reason }
            defer { state.waiting.removeAll() }
            return Array(state.waiting.values)
        }
        for continuation in waiting { continuation.resume(throwing: Failure(message: reason)) }
    }

    /// The reading thread: splits the stream at NUL bytes and hands each message on.
    private func readMessages(from fd: Int32) {
        var buffer = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = read(fd, &chunk, chunk.count)
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            buffer.append(contentsOf: chunk[0..<n])
            var start = 0
            while let end = buffer[start...].firstIndex(of: 0) {
                dispatch(Data(buffer[start..<end]))
                start = end + 1
            }
            buffer.removeFirst(start)
            // A message without its NUL past 256 MiB is not one.
            if buffer.count > 256 << 20 { break }
        }
        closeFD(fd)
        ended("the browser exited")
    }

    private func dispatch(_ data: Data) {
        let message = JSONValue(try? JSONSerialization.jsonObject(with: data))
        if let id = message["id"].int {
            guard let continuation = state.withLockedValue({ $0.waiting.removeValue(forKey: id) }) else { return }
            if case .object = message["error"] {
                continuation.resume(throwing: Failure(message: message["error"]["message"].string ?? "the browser refused the command"))
            } else {
                continuation.resume(returning: message["result"])
            }
            return
        }
        guard let method = message["method"].string else { return }
        let session = message["sessionId"].string ?? ""
        let handler = state.withLockedValue { $0.handlers[session] }
        handler?(method, message["params"], session)
    }
}

/// Closes a descriptor (a free function: inside ``DevTools`` `close` names its own method).
private func closeFD(_ fd: Int32) { _ = close(fd) }
