import Foundation
import Prefs
import PrefsTesting
import TestThreads
import Testing

/// A custom store whose `batch(_:)` applies its writes at once and takes them back when the body throws passes every
/// rule, `batch-rollback` included, through the public `ChangeFeed` API alone; forgetting `changes.invalidate(_:)`
/// fails that rule by name.
@Suite(.ownThreads)
struct TransactionalStoreTests {
    @Test func aCustomTransactionalStorePassesEveryRule() async throws {
        let report = try await KeyValueStoreConformance.verify(makeStore: { JournalingStore(invalidates: true) })
        #expect(report.brokenRules.isEmpty, "\(report.failures)")
        #expect(Set(report.skipped.keys) == [.closedStoreThrows])
    }

    @Test func takingABatchBackWithoutInvalidatingFailsBatchRollback() async throws {
        var report: KeyValueStoreConformance.Report?
        try await withKnownIssue {
            report = try await KeyValueStoreConformance.verify(makeStore: { JournalingStore(invalidates: false) })
        } matching: { issue in
            issue.comments.first?.rawValue.hasPrefix("batch-rollback: ") == true
        }
        #expect(report?.brokenRules == [.batchRollback], "\(report?.failures ?? [:])")
        let message = report?.failures[.batchRollback]?.first ?? ""
        #expect(
            message.contains("still reads 2, expected 1") && message.contains("changes.invalidate(_:)"), "\(message)")
    }
}

/// A store with transactional batches, as a store author writes one: values in memory under one recursive lock, and
/// for each open batch an undo journal holding each key's value from before the batch first wrote it.
final class JournalingStore: KeyValueStore, @unchecked Sendable {
    let changes = ChangeFeed()
    /// Whether taking a batch back calls `changes.invalidate(_:)`, without which a wrapper keeps what it read inside.
    private let invalidates: Bool
    /// Held by every write, and by a batch for its whole body: recursive, so that the body can write.
    private let lock = NSRecursiveLock()
    // Guarded by `lock`.
    private var values: [String: PrefValue] = [:]
    /// One journal per open batch, the innermost last.
    private var journals: [[String: PrefValue?]] = []

    init(invalidates: Bool) { self.invalidates = invalidates }

    func value(forKey key: String) throws -> PrefValue? { lock.withLock { values[key] } }

    func allValues() throws -> [String: PrefValue] { lock.withLock { values } }

    func setValue(_ value: PrefValue?, forKey key: String) throws {
        try updateValue(forKey: key) { _ in value }
    }

    @discardableResult
    func updateValue(forKey key: String, _ transform: (PrefValue?) throws -> PrefValue?) throws -> PrefValue? {
        try validateKey(key)
        let new = try lock.withLock {
            let old = values[key]
            let new = try transform(old)
            guard new != old else { return new }
            if let innermost = journals.indices.last, journals[innermost][key] == nil {
                journals[innermost][key] = .some(old)
            }
            values[key] = new
            // Outside a batch the change is announced now; inside one, when the outermost batch ends. Until then
            // wrappers must read it again rather than keep what they read before.
            if journals.isEmpty { changes.announce([key: new]) } else { changes.invalidate([key]) }
            return new
        }
        changes.deliverAnnouncements()
        return new
    }

    func replaceAll(_ new: [String: PrefValue]) throws {
        for key in new.keys { try validateKey(key) }
        try batch {
            for key in Set(values.keys).union(new.keys) { try setValue(new[key], forKey: key) }
        }
    }

    func batch<T>(_ body: () throws -> T) throws -> T {
        let result = try lock.withLock { () throws -> T in
            journals.append([:])
            let result: T
            do {
                result = try body()
            } catch {
                let journal = journals.removeLast()
                for (key, old) in journal { values[key] = old }
                if invalidates { changes.invalidate(Set(journal.keys)) }
                throw error
            }
            let journal = journals.removeLast()
            if let outer = journals.indices.last {
                // Joins the outer batch: its journal gains the keys it had not written yet.
                journals[outer].merge(journal) { outerOld, _ in outerOld }
            } else {
                let changed = journal.filter { key, old in values[key] != old }.keys
                changes.announce(Dictionary(uniqueKeysWithValues: changed.map { ($0, values[$0]) }))
            }
            return result
        }
        changes.deliverAnnouncements()
        return result
    }
}
