import Foundation
import Prefs
import PrefsTesting
import Synchronization
import TestThreads
import Testing

/// A store that breaks one rule of the contract fails the kit with that rule's name, and only the rules it breaks.
@Suite(.ownThreads)
struct BrokenStoreTests {
    typealias Rule = KeyValueStoreConformance.Rule

    @Test(arguments: [
        (BrokenStore.Fault.floatAsDouble, [Rule.valueRoundTrip]),
        (.updateToNilKeeps, [.nilRemoves]),
        (.noKeyCheck, [.keyValidation]),
        (.replaceAllMerges, [.replaceAll]),
        (.removeValuesKeepsLater, [.removeValues]),
        (.nonAtomicUpdate, [.updateAtomic]),
        (.throwingTransformWrites, [.updateThrowWritesNothing]),
        (.batchWithoutRollback, [.batchRollback, .batchNested, .batchObserversOnce]),
        (.deliversTwice, [.deliveryExactlyOnce]),
        (.deliversUnderLock, [.deliveryOutsideLocks]),
        (.closeDoesNothing, [.closedStoreThrows]),
    ])
    func aBrokenRuleIsReportedByName(_ fault: BrokenStore.Fault, _ broken: [Rule]) async throws {
        // Lost updates may also reach a values stream out of order; nothing else may fail.
        let mayAlsoBreak: Set<Rule> = fault == .nonAtomicUpdate ? [.deliveryInOrder] : []
        let named = Set(broken.map(\.name)).union(mayAlsoBreak.map(\.name))
        var report: KeyValueStoreConformance.Report?
        try await withKnownIssue {
            report = try await KeyValueStoreConformance.verify(close: { $0.close() }, makeStore: { BrokenStore(fault) })
        } matching: { issue in
            // Every issue starts with the name of one of the rules this fault breaks.
            let comment = issue.comments.first?.rawValue ?? ""
            return named.contains { name in comment.hasPrefix(name + ": ") }
        }
        let found = report?.brokenRules ?? []
        #expect(found.subtracting(mayAlsoBreak) == Set(broken), "\(report?.failures ?? [:])")
    }

    @Test func aStoreWithoutTransactionalBatchesIsReportedAsSkippingThem() async throws {
        let report = try await KeyValueStoreConformance.verify(
            unsupported: [.transactionalBatches], close: { $0.close() },
            makeStore: { BrokenStore(.batchWithoutRollback) })
        #expect(report.brokenRules.isEmpty)
        #expect(
            Set(report.skipped.keys) == [.batchAtOnce, .batchRollback, .batchNested, .batchObserversOnce])
        #expect(report.skipped[.batchRollback] == "the store declares no transactional batches")
    }
}

/// An ``InMemoryStore`` with one deliberate fault.
final class BrokenStore: KeyValueStore {
    enum Fault: Sendable {
        case floatAsDouble, updateToNilKeeps, noKeyCheck, replaceAllMerges, removeValuesKeepsLater, nonAtomicUpdate
        case throwingTransformWrites, batchWithoutRollback, deliversTwice, deliversUnderLock, closeDoesNothing
    }

    let fault: Fault
    private let inner = InMemoryStore()
    private let lock = NSRecursiveLock()
    private let closed = Atomic(false)
    private let batchDepth = Atomic(0)
    var changes: ChangeFeed { inner.changes }

    init(_ fault: Fault) { self.fault = fault }

    func close() { closed.store(true, ordering: .sequentiallyConsistent) }

    private func checkOpen() throws {
        if fault != .closeDoesNothing, closed.load(ordering: .sequentiallyConsistent) {
            throw PrefsError.storeClosed(path: "broken")
        }
    }

    private func locked<T>(_ body: () throws -> T) rethrows -> T {
        guard fault == .deliversUnderLock else { return try body() }
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }

    func value(forKey key: String) throws -> PrefValue? {
        try checkOpen()
        return try locked { try inner.value(forKey: key) }
    }

    func setValue(_ value: PrefValue?, forKey key: String) throws {
        try checkOpen()
        let key = mapped(key)
        try locked { try inner.setValue(stored(value), forKey: key) }
        if fault == .deliversTwice, batchDepth.load(ordering: .sequentiallyConsistent) == 0 {
            changes.publish(changedKeys: [key])
        }
    }

    @discardableResult
    func updateValue(forKey key: String, _ transform: (PrefValue?) throws -> PrefValue?) throws -> PrefValue? {
        try checkOpen()
        let key = mapped(key)
        switch fault {
        case .nonAtomicUpdate:
            let new = try transform(try inner.value(forKey: key))
            try inner.setValue(new, forKey: key)
            return new
        case .throwingTransformWrites:
            return try inner.updateValue(forKey: key) { current in
                do { return try transform(current) } catch {
                    try inner.setValue(.int(-1), forKey: key)
                    throw error
                }
            }
        default:
            let new = try locked {
                try inner.updateValue(forKey: key) { current in
                    let new = try transform(current)
                    return fault == .updateToNilKeeps && new == nil ? current : stored(new)
                }
            }
            if fault == .deliversTwice, batchDepth.load(ordering: .sequentiallyConsistent) == 0 {
                changes.publish(changedKeys: [key])
            }
            return new
        }
    }

    /// An invalid key, for the store that does not check keys, stored under a name of its own.
    private func mapped(_ key: String) -> String {
        fault == .noKeyCheck && (key.isEmpty || key.contains("\0")) ? "invalid" : key
    }

    private func stored(_ value: PrefValue?) -> PrefValue? {
        if fault == .floatAsDouble, case .float(let number)? = value { return .double(Double(number)) }
        return value
    }

    func allValues() throws -> [String: PrefValue] {
        try checkOpen()
        return try inner.allValues()
    }

    func replaceAll(_ values: [String: PrefValue]) throws {
        try checkOpen()
        guard fault == .replaceAllMerges else { return try inner.replaceAll(values) }
        for (key, value) in values { try inner.setValue(value, forKey: key) }
    }

    func removeValues(forKeys keys: some Sequence<String>) throws {
        try checkOpen()
        try inner.removeValues(forKeys: fault == .removeValuesKeepsLater ? Array(keys.prefix(1)) : Array(keys))
    }

    func batch<T>(_ body: () throws -> T) throws -> T {
        try checkOpen()
        guard fault == .batchWithoutRollback else {
            batchDepth.add(1, ordering: .sequentiallyConsistent)
            defer { batchDepth.subtract(1, ordering: .sequentiallyConsistent) }
            return try inner.batch(body)
        }
        return try body()
    }
}
