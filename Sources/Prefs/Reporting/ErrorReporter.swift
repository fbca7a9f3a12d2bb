import Foundation
import Synchronization

/// Where errors that cannot be thrown go: a read that fell back to the default, a write through a non-throwing
/// wrapper, a reload of a file another process damaged.
///
/// This sits below every store and below configuration, so a store can report while it opens without touching
/// ``PrefsConfig``'s state. The handler is copied out under the lock and called after releasing it: a handler may
/// itself read or write preferences, or replace the handler.
package enum ErrorReporter {
    private static let handler = Mutex<@Sendable (PrefsReport) -> Void>(ErrorReporter.logToStandardError)
    /// The store-level failures already reported, by source (a store's change feed) and error text.
    private static let incidents = Mutex<[ObjectIdentifier: Set<String>]>([:])
    /// Sources whose store-level failures are not reported: a store the library opens for a moment and whose
    /// failures the operation that opened it handles itself (the store that moves a vault's key).
    private static let silenced = Mutex<Set<ObjectIdentifier>>([])

    /// Whether the handler is still the default one, which prints: a test that captures reports then keeps them
    /// out of its output.
    private static let handlerIsDefault = Atomic<Bool>(true)

    package static var current: @Sendable (PrefsReport) -> Void {
        get { handler.withLock { $0 } }
        set {
            handler.withLock { $0 = newValue }
            handlerIsDefault.store(false, ordering: .relaxed)
        }
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
        if let capture {
            capture.append(report)
            if handlerIsDefault.load(ordering: .relaxed), !report.isNotice { return }
        }
        let deliver = current
        deliver(report)
    }

    /// Reports a failure of a whole store (a file that cannot be read) once, however many reads run into it;
    /// the same error is reported again only after ``forgetIncidents(of:)``, when the store has recovered.
    package static func reportOnce(
        _ error: any Error, key: String, operation: PrefsReport.Operation, source: AnyObject, file: String? = nil
    ) {
        guard !silenced.withLock({ $0.contains(ObjectIdentifier(source)) }) else { return }
        let text = String(describing: error)
        let isNew = incidents.withLock { $0[ObjectIdentifier(source), default: []].insert(text).inserted }
        if isNew { report(error, key: key, operation: operation, file: file) }
    }

    /// Runs `body` with the store-level failures of `source` (a store's change feed) unreported; `body` handles them.
    package static func silencing<Result>(_ source: AnyObject, _ body: () throws -> Result) rethrows -> Result {
        let id = ObjectIdentifier(source)
        silenced.withLock { _ = $0.insert(id) }
        defer { silenced.withLock { _ = $0.remove(id) } }
        return try body()
    }

    /// Called when a store that failed works again, so a later failure is reported afresh.
    package static func forgetIncidents(of source: AnyObject) {
        incidents.withLock { _ = $0.removeValue(forKey: ObjectIdentifier(source)) }
    }

    /// Runs `body`, reporting instead of throwing what it throws.
    static func reporting(key: String, operation: PrefsReport.Operation, _ body: () throws -> Void) {
        do { try body() } catch { report(error, key: key, operation: operation) }
    }

    /// Whether a failed write was ever reported, so that successful writes skip the lock until one is.
    private static let anyWriteIncident = Atomic<Bool>(false)
    private static let writeCausePrefix = "write\u{0}"

    /// Runs a write of a wrapper that cannot throw, reporting a failure of the store's file once per store (`source`,
    /// its change feed) and cause: a read-only folder or a damaged file fails every write alike, and a slider writing
    /// sixty times a second must not print sixty lines. Only a write that reaches the store's file re-arms the report
    /// (``writeReachedTheFile(of:)``): one that succeeds because it changed nothing says nothing about the cause.
    /// Other failures (a forced key, a value that cannot be encoded) are reported every time.
    static func reportingWrite(key: String, source: AnyObject, _ body: () throws -> Void) {
        do {
            try body()
        } catch {
            // Only failures of the store's file repeat for every key and every write; a refused value is news.
            guard let fileError = PrefsReport.fileError(in: error) else {
                report(error, key: key, operation: .write)
                return
            }
            anyWriteIncident.store(true, ordering: .relaxed)
            let cause = writeCausePrefix + fileError.repeatCause
            let isNew = incidents.withLock { $0[ObjectIdentifier(source), default: []].insert(cause).inserted }
            if isNew { report(error, key: key, operation: .write) }
        }
    }

    /// A write of the store whose feed is `source` reached its file: the next failure of a write is news.
    static func writeReachedTheFile(of source: AnyObject) {
        guard anyWriteIncident.load(ordering: .relaxed) else { return }
        incidents.withLock { incidents in
            let id = ObjectIdentifier(source)
            incidents[id] = incidents[id]?.filter { !$0.hasPrefix(writeCausePrefix) }
        }
    }

    @Sendable static func logToStandardError(_ report: PrefsReport) {
        FileHandle.standardError.write(Data("Prefs: \(report)\n".utf8))
    }
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
