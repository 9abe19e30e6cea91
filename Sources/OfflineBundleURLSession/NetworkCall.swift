import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One request's call to the network through a URLSession, cancelled by `OfflineURLProtocol.stopLoading()` from the
/// thread that cancels.
final class NetworkCall: @unchecked Sendable {
    // Unchecked: `task` and `cancelled` are only touched under `lock`.
    private let lock = NSLock()
    private var task: URLSessionDataTask?
    private var cancelled = false

    /// Whether ``cancel()`` ran.
    var isCancelled: Bool { lock.withLock { cancelled } }

    /// Sends `request` through `session`; `done` is called once, on URLSession's callback queue (or at once when the
    /// call was cancelled first).
    ///
    /// The task is created and resumed from another thread: creating a task does a synchronous hop onto the queue
    /// every corelibs-foundation session shares, which the protocol's thread holds while in `startLoading()`.
    func start(_ request: URLRequest, on session: URLSession, done: @escaping @Sendable (Result<Carried<NetworkAnswer>, any Error>) -> Void) {
        let (outgoing, session) = (Carried(request), Carried(session))
        DispatchQueue.global().async {
            let task = session.value.dataTask(with: outgoing.value) { data, response, error in
                if let error {
                    done(.failure(error))
                } else if let response {
                    done(.success(Carried(NetworkAnswer(response: response, data: data ?? Data()))))
                } else {
                    done(.failure(URLError(.badServerResponse)))
                }
            }
            let cancelled = self.lock.withLock {
                if !self.cancelled { self.task = task }
                return self.cancelled
            }
            if cancelled {
                done(.failure(URLError(.cancelled)))
            } else {
                task.resume()
            }
        }
    }

    /// Cancels the call: its task, if it started, and any start to come.
    func cancel() {
        let task = lock.withLock {
            cancelled = true
            return self.task
        }
        task?.cancel()
    }
}
