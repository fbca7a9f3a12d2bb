import Foundation
import Synchronization

/// Where errors that cannot be thrown go: a read that fell back to the default, a write through a non-throwing
/// wrapper, a reload of a file another process damaged.
///
/// This sits below every store and below configuration, so a store can report while it opens without touching
/// ``PrefsConfig``'s state. The handler is copied out under the lock and called after releasing it: a handler may
/// itself read or write preferences, or replace the handler.
package enum ErrorReporter {
    package static var current: @Sendable (PrefsReport) -> Void {
        get { ProcessSettings.values.withLock { $0.handler } }
        set {
            ProcessSettings.values.withLock {
                $0.handler = newValue
                $0.handlerIsDefault = false
            }
        }
    }

    /// The reports of the task's isolated test (PrefsTesting's `.isolatedPreferences`), where it keeps them.
    @TaskLocal package static var capture: ReportCapture?

    /// Reports `error`; a report about a whole store (an empty `key`) names `file`, or else the file the error names.
    /// Inside an isolated test the report is kept for the test; it reaches the handler too when the app or test set
    /// one, or when it is a notice (a real file used by the test), which the developer must see.
    package static func report(
        _ error: any Error, key: String, operation: PrefsReport.Operation, file: String? = nil,
        source: (any ReadSource)? = nil
    ) {
        let report = PrefsReport(key: key, operation: operation, error: error, file: file, source: source)
        let (deliver, isDefault) = ProcessSettings.values.withLock { ($0.handler, $0.handlerIsDefault) }
        if let capture {
            capture.append(report)
            if isDefault, !report.isNotice { return }
        }
        deliver(report)
    }

    /// Runs `body`, reporting instead of throwing what it throws.
    static func reporting(key: String, operation: PrefsReport.Operation, _ body: () throws -> Void) {
        do { try body() } catch { report(error, key: key, operation: operation) }
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
