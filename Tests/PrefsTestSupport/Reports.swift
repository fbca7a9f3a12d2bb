import Foundation
public import Prefs
import Synchronization

/// A key name no other test uses, so tests can share a store or the global error handler safely.
public func uniqueKey(_ base: String = "key") -> String { "\(base)-\(UUID().uuidString.prefix(8))" }

/// Collects the reports of `PrefsConfig.errorHandler`; tests filter by their own unique key.
///
/// One collector for every test target: the handler is process-wide, and the test targets share one process, so a
/// second collector installing its own handler would take the reports away from the first.
public enum Reports {
    private static let all = Mutex<[PrefsReport]>([])
    private static let installed: Void = {
        PrefsConfig.errorHandler = { report in Reports.all.withLock { $0.append(report) } }
    }()

    /// Installs the collector (once per process; later calls do nothing).
    public static func install() { _ = installed }

    /// Every report collected so far.
    public static func everything() -> [PrefsReport] { all.withLock { $0 } }

    /// The reports about `key`.
    public static func `for`(_ key: String) -> [PrefsReport] {
        all.withLock { $0.filter { $0.key == key } }
    }

    /// The reports whose error names a path inside `directory`.
    public static func naming(_ directory: TempDir) -> [PrefsReport] {
        everything().filter { String(describing: $0.error).contains(directory.url.path) }
    }
}
