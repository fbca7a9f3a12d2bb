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

    package static var current: @Sendable (PrefsReport) -> Void {
        get { handler.withLock { $0 } }
        set { handler.withLock { $0 = newValue } }
    }

    package static func report(_ error: any Error, key: String, operation: PrefsReport.Operation) {
        let deliver = current
        deliver(PrefsReport(key: key, operation: operation, error: error))
    }

    /// Reports a failure of a whole store (a file that cannot be read) once, however many reads run into it;
    /// the same error is reported again only after ``forgetIncidents(of:)``, when the store has recovered.
    package static func reportOnce(_ error: any Error, key: String, operation: PrefsReport.Operation, source: AnyObject)
    {
        let text = String(describing: error)
        let isNew = incidents.withLock { $0[ObjectIdentifier(source), default: []].insert(text).inserted }
        if isNew { report(error, key: key, operation: operation) }
    }

    /// Called when a store that failed works again, so a later failure is reported afresh.
    package static func forgetIncidents(of source: AnyObject) {
        incidents.withLock { _ = $0.removeValue(forKey: ObjectIdentifier(source)) }
    }

    /// Runs `body`, reporting instead of throwing what it throws.
    static func reporting(key: String, operation: PrefsReport.Operation, _ body: () throws -> Void) {
        do { try body() } catch { report(error, key: key, operation: operation) }
    }

    @Sendable static func logToStandardError(_ report: PrefsReport) {
        FileHandle.standardError.write(Data("Prefs: \(report)\n".utf8))
    }
}
