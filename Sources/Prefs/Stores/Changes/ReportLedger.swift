import Synchronization

/// The store-level failures already reported about one store (kept by its change feed) or one store's system-wide
/// layers, by cause, so that each is reported once: it lives and dies with what it is about, so a store made later
/// starts afresh. A ledger made `silenced` reports nothing: a store the library opens for a moment, whose failures
/// the operation that opened it handles itself (the store that moves a vault's key).
///
/// A store's feed's ledger is also the gate of the reports of its background work (looks at its file, timed
/// commits, reloads of system-wide files): once the store's file is closed none is delivered, and closing waits for
/// one being delivered on another thread, so that nothing about a store reaches the handler after its last
/// `close()` has returned.
package final class ReportLedger: Sendable {
    private struct State {
        var causes: Set<String> = []
        /// Set when the store's file is closed: its background work reports nothing more.
        var closed = false
        /// The threads delivering a report of background work now, and how many each.
        var delivering: [ThreadID: Int] = [:]
    }

    private let state = ConditionProtected(State())
    private let silenced: Bool
    /// Whether a write failure was ever noted, so that writes reaching the file skip the lock until one is.
    private let anyWriteFailure = Atomic<Bool>(false)

    package init(silenced: Bool = false) { self.silenced = silenced }

    /// Reports a failure of the whole store (a file that cannot be read) once, however many reads run into it; the
    /// same error is reported again only after ``forget()``, when the store has recovered.
    package func reportOnce(
        _ error: any Error, key: String, operation: PrefsReport.Operation, file: String? = nil
    ) {
        if isNew(String(describing: error)) { ErrorReporter.report(error, key: key, operation: operation, file: file) }
    }

    /// Runs a write of a wrapper that cannot throw, reporting a failure of the store's file once per cause: a
    /// read-only folder or a damaged file fails every write alike, and a slider writing sixty times a second must not
    /// print sixty lines. Only a write that reaches the store's file re-arms the report (``writeReachedTheFile()``):
    /// one that succeeds because it changed nothing says nothing about the cause. Other failures (a forced key, a
    /// value that cannot be encoded) are reported every time.
    func reportingWrite(key: String, _ body: () throws -> Void) {
        do {
            try body()
        } catch {
            // Only failures of the store's file repeat for every key and every write; a refused value is news.
            guard let fileError = PrefsReport.fileError(in: error) else {
                ErrorReporter.report(error, key: key, operation: .write)
                return
            }
            if isNewWriteFailure(fileError.repeatCause) { ErrorReporter.report(error, key: key, operation: .write) }
        }
    }

    /// Whether `cause` is reported for the first time (and not silenced); notes it.
    private func isNew(_ cause: String) -> Bool {
        !silenced && state.withLock { state, _ in state.causes.insert(cause).inserted }
    }

    /// The same for a write failure of the store's file, which ``writeReachedTheFile()`` forgets.
    private func isNewWriteFailure(_ cause: String) -> Bool {
        anyWriteFailure.store(true, ordering: .relaxed)
        return isNew(Self.writePrefix + cause)
    }

    /// The store works again: every failure is news again.
    package func forget() { state.withLock { state, _ in state.causes.removeAll() } }

    /// A write reached the store's file: the next failure of a write is news.
    func writeReachedTheFile() {
        guard anyWriteFailure.load(ordering: .relaxed) else { return }
        state.withLock { state, _ in state.causes = state.causes.filter { !$0.hasPrefix(Self.writePrefix) } }
    }

    private static let writePrefix = "write\u{0}"

    /// Runs `deliver`, which reports something the store's background work found, unless the store's file has been
    /// closed; ``close()`` waits for it to return. With `background` false (the same work run for a caller), it just
    /// runs it. Call holding no lock.
    func fromBackground(if background: Bool = true, _ deliver: () -> Void) {
        guard background else { return deliver() }
        let thread = ThreadID.current
        let admitted = state.withLock { state, _ in
            guard !state.closed else { return false }
            state.delivering[thread, default: 0] += 1
            return true
        }
        guard admitted else { return }
        defer {
            state.withLock { state, signals in
                state.delivering[thread] = state.delivering[thread].flatMap { $0 > 1 ? $0 - 1 : nil }
                signals.broadcast()
            }
        }
        deliver()
    }

    /// The store's file is closed: no report of its background work is delivered from now on, and one being
    /// delivered on another thread is waited for (one on this thread, a handler closing the store, is not). Call
    /// holding no lock.
    func close() {
        let thread = ThreadID.current
        state.withLock { state, signals in
            state.closed = true
            while state.delivering.keys.contains(where: { $0 != thread }) { signals.wait(for: .seconds(1)) }
        }
    }
}
