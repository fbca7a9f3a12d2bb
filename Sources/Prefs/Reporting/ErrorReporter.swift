import Foundation
import Synchronization

/// Where errors that cannot be thrown go: a read that fell back to the default, a write through a non-throwing
/// wrapper, a reload of a file another process damaged.
///
/// This sits below every store and below configuration, so a store can report while it opens without touching
/// ``PrefsConfig``'s state. The handler is copied out under the lock and called after releasing it: a handler may
/// itself read or write preferences, or replace the handler.
package enum ErrorReporter {
    /// The handler, and whether it is still the default one, which prints: a test that captures reports then keeps
    /// them out of its output.
    private static let handler = Mutex<(deliver: @Sendable (PrefsReport) -> Void, isDefault: Bool)>(
        (ErrorReporter.logToStandardError, true))

    package static var current: @Sendable (PrefsReport) -> Void {
        get { handler.withLock { $0.deliver } }
        set { handler.withLock { $0 = (newValue, false) } }
    }

    /// The reports of the task's isolated test (PrefsTesting's `.isolatedPreferences`), where it keeps them.
    @TaskLocal package static var capture: ReportCapture?

    /// Reports `error`; a report about a whole store (an empty `key`) names `file`, or else the file the error names.
    /// Inside an isolated test the report is kept for the test; it reaches the handler too when the app or test set
    /// one, or when it is a notice (a real file used by the test), which the developer must see.
    package static func report(
        _ error: any Error, key: String, operation: PrefsReport.Operation, file: String? = nil, domain: String? = nil
    ) {
        let report = PrefsReport(key: key, operation: operation, error: error, file: file, domain: domain)
        let (deliver, isDefault) = handler.withLock { $0 }
        if let capture {
            capture.append(report)
            if isDefault, !report.isNotice { return }
        }
        deliver(report)
    }

    /// Reports a failure of a whole store (a file that cannot be read) once in `ledger` (the store's), however many
    /// reads run into it; the same error is reported again only after the ledger forgets it, when the store has
    /// recovered.
    package static func reportOnce(
        _ error: any Error, key: String, operation: PrefsReport.Operation, in ledger: ReportLedger, file: String? = nil
    ) {
        if ledger.isNew(String(describing: error)) { report(error, key: key, operation: operation, file: file) }
    }

    /// Runs `body`, reporting instead of throwing what it throws.
    static func reporting(key: String, operation: PrefsReport.Operation, _ body: () throws -> Void) {
        do { try body() } catch { report(error, key: key, operation: operation) }
    }

    /// Runs a write of a wrapper that cannot throw, reporting a failure of the store's file once per cause in the
    /// store's `ledger`: a read-only folder or a damaged file fails every write alike, and a slider writing sixty
    /// times a second must not print sixty lines. Only a write that reaches the store's file re-arms the report
    /// (``ReportLedger/writeReachedTheFile()``): one that succeeds because it changed nothing says nothing about the
    /// cause. Other failures (a forced key, a value that cannot be encoded) are reported every time.
    static func reportingWrite(key: String, ledger: ReportLedger, _ body: () throws -> Void) {
        do {
            try body()
        } catch {
            // Only failures of the store's file repeat for every key and every write; a refused value is news.
            guard let fileError = PrefsReport.fileError(in: error) else {
                report(error, key: key, operation: .write)
                return
            }
            if ledger.isNewWriteFailure(fileError.repeatCause) { report(error, key: key, operation: .write) }
        }
    }

    @Sendable static func logToStandardError(_ report: PrefsReport) {
        FileHandle.standardError.write(Data("Prefs: \(report)\n".utf8))
    }
}

/// The store-level failures already reported about one store (kept by its change feed) or one store's system-wide
/// layers, by cause, so that each is reported once: it lives and dies with what it is about, so a store made later
/// starts afresh. A ledger made `silenced` reports nothing: a store the library opens for a moment, whose failures
/// the operation that opened it handles itself (the store that moves a vault's key).
package final class ReportLedger: Sendable {
    private let causes: Mutex<Set<String>>
    private let silenced: Bool
    /// Whether a write failure was ever noted, so that writes reaching the file skip the lock until one is.
    private let anyWriteFailure = Atomic<Bool>(false)

    package init(silenced: Bool = false) {
        self.silenced = silenced
        causes = Mutex([])
    }

    /// Whether `cause` is reported for the first time (and not silenced); notes it.
    func isNew(_ cause: String) -> Bool {
        !silenced && causes.withLock { $0.insert(cause).inserted }
    }

    /// The same for a write failure of the store's file, which ``writeReachedTheFile()`` forgets.
    func isNewWriteFailure(_ cause: String) -> Bool {
        anyWriteFailure.store(true, ordering: .relaxed)
        return isNew(Self.writePrefix + cause)
    }

    /// The store works again: every failure is news again.
    package func forget() { causes.withLock { $0.removeAll() } }

    /// A write reached the store's file: the next failure of a write is news.
    func writeReachedTheFile() {
        guard anyWriteFailure.load(ordering: .relaxed) else { return }
        causes.withLock { $0 = $0.filter { !$0.hasPrefix(Self.writePrefix) } }
    }

    private static let writePrefix = "write\u{0}"
}

/// The reports made inside one isolated test, in the order they were made.
package final class ReportCapture: Sendable {
    private let reports = Mutex<[PrefsReport]>([])

    package init() {}

    func append(_ report: PrefsReport) { reports.withLock { $0.append(report) } }

    /// Every report so far.
    package var all: [PrefsReport] { reports.withLock { $0 } }

    /// Every report so far, leaving none.
    package func take() -> [PrefsReport] {
        reports.withLock { reports in
            defer { reports = [] }
            return reports
        }
    }
}
