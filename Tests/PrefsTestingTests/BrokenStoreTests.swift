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
        (.ignoresRemovals, [.nilRemoves, .allValues, .replaceAll, .removeValues]),
        (.deliversTwice, [.deliveryExactlyOnce, .replaceAll, .batchObserversOnce]),
        (.closeDoesNothing, [.closedStoreThrows]),
    ])
    func aBrokenRuleIsReportedByName(_ fault: BrokenStore.Fault, _ broken: [Rule]) async throws {
        // A second announcement of a write, read when it is delivered, may also reach a values stream after a later
        // value; nothing else may fail.
        let mayAlsoBreak: Set<Rule> = fault == .deliversTwice ? [.deliveryInOrder] : []
        let named = Set(broken.map(\.name)).union(mayAlsoBreak.map(\.name))
        var report: KeyValueStoreConformance.Report?
        try await withKnownIssue {
            report = try await KeyValueStoreConformance.verify(close: { $0.close() }, makeStore: { BrokenStore(fault) })
        } matching: { issue in
            // Every issue starts with the name of one of the rules this fault breaks.
            let comment = issue.comments.first?.rawValue ?? ""
            return named.contains { name in comment.hasPrefix(name + ": ") }
        }
        #expect(report?.brokenRules.subtracting(mayAlsoBreak) == Set(broken), "\(report?.failures ?? [:])")
    }

    /// The same store without a fault passes every rule, batches included: Prefs stages a batch's writes and makes
    /// them one `write`, so a store of four members needs nothing more.
    @Test func theStoreWithoutAFaultPassesEveryRule() async throws {
        let report = try await KeyValueStoreConformance.verify(close: { $0.close() }, makeStore: { BrokenStore(.none) })
        #expect(report.brokenRules.isEmpty, "\(report.failures)")
        #expect(report.skipped.isEmpty, "\(report.skipped)")
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

    @Test func aStoreWithoutTransactionalBatchesIsReportedAsSkippingThem() async throws {
        let report = try await KeyValueStoreConformance.verify(
            unsupported: [.transactionalBatches], close: { $0.close() },
            makeStore: { BrokenStore(.none) })
        #expect(report.brokenRules.isEmpty, "\(report.failures)")
        #expect(
            Set(report.skipped.keys) == [.batchAtOnce, .batchRollback, .batchNested, .batchObserversOnce])
        #expect(report.skipped[.batchRollback] == "the store declares no transactional batches")
    }
}

/// A store of four members, as an app writes one, with one deliberate fault.
final class BrokenStore: KeyValueStore {
    enum Fault: Sendable {
        /// None: the store as it should be.
        case none
        case floatAsDouble
        /// Keeps strings of at most 200 bytes and data of at most 1 KiB, as a `VARCHAR(200)` column would.
        case truncatesLargeValues
        /// Keeps the first 40 bytes of a key, so two long keys alike at the start become one.
        case truncatesKeys
        /// Ignores the removals it is given.
        case ignoresRemovals
        /// Tells its hub of each of its own writes, while holding its `Mutex`: Prefs announces them already.
        case deliversTwice
        case closeDoesNothing
    }

    let fault: Fault
    let hub = StoreHub()
    private let values = Mutex<[String: PrefValue]>([:])
    private let closed = Atomic(false)

    init(_ fault: Fault) { self.fault = fault }

    func close() { closed.store(true, ordering: .sequentiallyConsistent) }

    private func checkOpen() throws {
        if fault != .closeDoesNothing, closed.load(ordering: .sequentiallyConsistent) {
            throw PrefsError.storeClosed(path: "broken")
        }
    }

    func read(_ key: String) throws -> PrefValue? {
        try checkOpen()
        return values.withLock { $0[mapped(key)] }
    }

    func readAll() throws -> [String: PrefValue] {
        try checkOpen()
        return values.withLock { $0 }
    }

    func write(_ changes: [String: PrefValue?]) throws {
        try checkOpen()
        values.withLock { values in
            for (key, value) in changes {
                if value == nil, fault == .ignoresRemovals { continue }
                values[mapped(key)] = stored(value)
            }
            // Harmless but for the count: from inside a write, Prefs delivers it once its own lock is released.
            if fault == .deliversTwice { hub.keysChanged(changes.keys) }
        }
    }

    /// A long key, for the store that cuts keys, cut.
    private func mapped(_ key: String) -> String {
        fault == .truncatesKeys ? String(decoding: key.utf8.prefix(40), as: UTF8.self) : key
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
}
