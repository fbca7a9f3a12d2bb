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
        (.truncatesLargeValues, [.largeValues]),
        (.truncatesKeys, [.longKeys]),
        (.losesConcurrentWrites, [.concurrentWrites]),
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

    /// A `.float(nan)` read back as a `.double(nan)` is shown with its case, and with what was expected.
    @Test func messagesShowEachValuesCaseAndWhatWasExpected() async throws {
        var report: KeyValueStoreConformance.Report?
        await withKnownIssue {
            report = try await KeyValueStoreConformance.verify(makeStore: { BrokenStore(.floatAsDouble) })
        }
        let messages = report?.failures[.valueRoundTrip] ?? []
        #expect(messages.contains("float-nan: value(forKey:) expected .float(nan), read .double(nan)"), "\(messages)")
    }

    /// A store that announces its changes but never delivers them is told so, and the rules that wait for
    /// deliveries are skipped rather than each waiting out its hang guard.
    @Test func aStoreThatNeverDeliversIsToldSoQuickly() async throws {
        let report = try await verify(.announcesWithoutDelivering, breaking: .deliveryBeforeReturn)
        let messages = report?.failures[.deliveryBeforeReturn] ?? []
        #expect(report?.brokenRules == [.deliveryBeforeReturn], "\(report?.failures ?? [:])")
        #expect(messages.contains { $0.contains("call changes.deliverAnnouncements()") }, "\(messages)")
        #expect(report?.skipped[.deliveryOutsideLocks]?.contains("no change of the store reaches an observer") == true)
        #expect(report?.skipped[.replaceAll] != nil && report?.skipped[.valuesStartWithCurrent] != nil)
    }

    /// A store that announces nothing is told that, within the grace the kit gives a late delivery.
    @Test func aStoreThatAnnouncesNothingIsToldSo() async throws {
        let report = try await verify(.announcesNothing, breaking: .deliveryBeforeReturn)
        let messages = report?.failures[.deliveryBeforeReturn] ?? []
        #expect(report?.brokenRules == [.deliveryBeforeReturn], "\(report?.failures ?? [:])")
        #expect(messages.contains { $0.contains("the store announces nothing") }, "\(messages)")
    }

    /// A store that publishes while holding its `Mutex` fails `delivery-outside-locks` by name; the rules whose
    /// `values` streams would read the store inside that delivery (and so lock the `Mutex` again: "Recursive call to
    /// lock Mutex", which stops the process) are skipped, so this test process lives to report it.
    @Test func aStorePublishingUnderItsMutexFailsARuleInsteadOfStoppingTheProcess() async throws {
        let report = try await verify(.publishesUnderItsMutex, breaking: .deliveryOutsideLocks)
        #expect(report?.brokenRules == [.deliveryOutsideLocks], "\(report?.failures ?? [:])")
        #expect(report?.failures[.deliveryOutsideLocks]?.first?.contains("Recursive call to lock Mutex") == true)
        #expect(report?.skipped[.valuesStartWithCurrent] != nil)
        #expect(report?.skipped[.deliveryInOrder]?.contains("observers run under a lock of the store") == true)
    }

    /// The kit's report on a ``DeliveryFaultStore``, each issue it records known and about `rule`.
    private func verify(_ fault: DeliveryFaultStore.Fault, breaking rule: Rule) async throws
        -> KeyValueStoreConformance.Report?
    {
        var report: KeyValueStoreConformance.Report?
        try await withKnownIssue {
            report = try await KeyValueStoreConformance.verify(
                unsupported: [.transactionalBatches], makeStore: { DeliveryFaultStore(fault) })
        } matching: { issue in
            issue.comments.first?.rawValue.hasPrefix(rule.name + ": ") == true
        }
        return report
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
        /// Keeps strings of at most 200 bytes and data of at most 1 KiB, as a `VARCHAR(200)` column would.
        case truncatesLargeValues
        /// Keeps the first 40 bytes of a key, so two long keys alike at the start become one.
        case truncatesKeys
        /// Writes a key by reading the whole content and writing it back, unlocked, as a store rewriting a whole
        /// file without a lock does: writes of different keys from several threads lose each other.
        case losesConcurrentWrites
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
        return try locked { try inner.value(forKey: mapped(key)) }
    }

    func setValue(_ value: PrefValue?, forKey key: String) throws {
        try checkOpen()
        let key = mapped(key)
        if fault == .losesConcurrentWrites {
            var content = try inner.allValues()
            usleep(200)  // the time a store takes to read a whole file before writing it back: others write meanwhile
            content[key] = value
            return try inner.replaceAll(content)
        }
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

    /// An invalid key, for the store that does not check keys, stored under a name of its own; a long one, for the
    /// store that cuts keys, cut.
    private func mapped(_ key: String) -> String {
        if fault == .truncatesKeys { return String(decoding: key.utf8.prefix(40), as: UTF8.self) }
        return fault == .noKeyCheck && (key.isEmpty || key.contains("\0")) ? "invalid" : key
    }

    private func stored(_ value: PrefValue?) -> PrefValue? {
        switch (fault, value) {
        case (.floatAsDouble, .float(let number)?): return .double(Double(number))
        case (.truncatesLargeValues, .string(let text)?):
            return .string(String(decoding: text.utf8.prefix(200), as: UTF8.self))
        case (.truncatesLargeValues, .data(let bytes)?): return .data(bytes.prefix(1024))
        default: return value
        }
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
        let keys = keys.map(mapped)
        try inner.removeValues(forKeys: fault == .removeValuesKeepsLater ? Array(keys.prefix(1)) : keys)
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

/// A store of its own (not over ``InMemoryStore``, which delivers as it should) whose one fault is in how it tells
/// observers of a change.
final class DeliveryFaultStore: KeyValueStore {
    enum Fault: Sendable {
        /// Calls `changes.announce` and never `changes.deliverAnnouncements()`.
        case announcesWithoutDelivering
        /// Tells the feed nothing.
        case announcesNothing
        /// Calls `changes.publish(changedKeys:)` while holding its `Mutex`.
        case publishesUnderItsMutex
    }

    let fault: Fault
    let changes = ChangeFeed()
    private let values = Mutex<[String: PrefValue]>([:])

    init(_ fault: Fault) { self.fault = fault }

    func value(forKey key: String) throws -> PrefValue? { values.withLock { $0[key] } }

    func allValues() throws -> [String: PrefValue] { values.withLock { $0 } }

    func setValue(_ value: PrefValue?, forKey key: String) throws {
        try updateValue(forKey: key) { _ in value }
    }

    @discardableResult
    func updateValue(forKey key: String, _ transform: (PrefValue?) throws -> PrefValue?) throws -> PrefValue? {
        try validateKey(key)
        return try values.withLock { values in
            let old = values[key]
            let new = try transform(old)
            guard new != old else { return new }
            values[key] = new
            switch fault {
            case .announcesWithoutDelivering: changes.announce([key: new])
            case .announcesNothing: break
            case .publishesUnderItsMutex: changes.publish(changedKeys: [key])
            }
            return new
        }
    }
}
