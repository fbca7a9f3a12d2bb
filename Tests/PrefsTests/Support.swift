import Foundation
import PrefsTestSupport
import Synchronization
import Testing

@testable import Prefs

enum Theme: String, Codable, Sendable, Equatable, CaseIterable {
    case light, dark, system
}

struct UserPreferences: Codable, Sendable, Equatable {
    var hasHapticsEnabled = true
    var prefersDarkMode = false
    var fontScale = 1.0
}

/// A key name no other test uses, so tests can share a store or the global error handler safely.
func uniqueKey(_ base: String = "key") -> String { "\(base)-\(UUID().uuidString.prefix(8))" }

/// The shared temporary folder of the test targets (PrefsTestSupport).
typealias TempDir = PrefsTestSupport.TempDir

/// Collects the reports of `PrefsConfig.errorHandler`; tests filter by their own unique key.
enum Reports {
    private static let all = Mutex<[PrefsReport]>([])
    private static let installed: Void = {
        PrefsConfig.errorHandler = { report in Reports.all.withLock { $0.append(report) } }
    }()

    static func install() { _ = installed }
    static func everything() -> [PrefsReport] { all.withLock { $0 } }
    static func `for`(_ key: String) -> [PrefsReport] {
        all.withLock { $0.filter { $0.key == key } }
    }
}

struct TimedOut: Error {}

/// Takes the first `count` elements of a stream, failing after `seconds` (a guard, not a synchronisation: the
/// default leaves room for the collecting task to wait for one of Swift Testing's shared threads while other tests
/// block them).
func first<T: Sendable>(_ count: Int, of stream: AsyncStream<T>, within seconds: Double = 60) async throws -> [T] {
    try await withThrowingTaskGroup(of: [T]?.self) { group in
        group.addTask {
            var collected: [T] = []
            for await element in stream {
                collected.append(element)
                if collected.count == count { break }
            }
            return collected
        }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            return nil
        }
        defer { group.cancelAll() }
        guard let result = try await group.next(), let collected = result else { throw TimedOut() }
        return collected
    }
}

/// Waits until `condition` holds, checking each time `stream` yields; fails after `seconds`.
func waitUntil<T: Sendable>(
    _ stream: AsyncStream<T>, within seconds: Double = 60, _ condition: @escaping @Sendable (T) -> Bool
) async throws {
    try await withThrowingTaskGroup(of: Bool.self) { group in
        group.addTask {
            for await element in stream where condition(element) { return true }
            return false
        }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            return false
        }
        defer { group.cancelAll() }
        guard try await group.next() == true else { throw TimedOut() }
    }
}
