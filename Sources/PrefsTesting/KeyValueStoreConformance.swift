import Foundation
import Observation
public import Prefs
import Synchronization
public import Testing

/// `try await KeyValueStoreConformance.verify(makeStore: { try MyStore() })` checks a ``Prefs/KeyValueStore``
/// against the contract every store keeps, the one Prefs' own stores pass.
///
/// Call it from a Swift Testing test. It makes one fresh store per rule with `makeStore`, runs the rule against
/// it, and records one issue for each rule the store breaks, its message starting with the rule's name:
///
/// ```swift
/// import PrefsTesting
/// import Testing
///
/// @Test func myStoreKeepsTheContract() async throws {
///     let folder = FileManager.default.temporaryDirectory.appending(path: UUID().uuidString)
///     defer { try? FileManager.default.removeItem(at: folder) }
///     try await KeyValueStoreConformance.verify(makeStore: {
///         try MyStore(url: folder.appending(path: "\(UUID().uuidString).json"))
///     })
/// }
/// ```
///
/// The rules, by their stable names (see ``Rule``):
///
/// - `value-round-trip`: every kind of ``Prefs/PrefValue`` reads back exactly as written, extremes included
///   (`Int64.min`, `UInt64.max`, NaN, -0, a `Float` kept apart from a `Double`, empty text and data, nested
///   containers, sub-second dates), through `value(forKey:)` and `allValues()`.
/// - `large-values`: a string of 100 000 bytes, a megabyte of data and a long array read back whole, or their write
///   throws and nothing is stored: a store may refuse what it cannot keep, never keep less of it silently.
/// - `long-keys`: keys of 100 to 1 000 bytes that differ only in their last character stay apart, each with its own
///   value, and `allValues()` lists each exactly; a store may refuse a key it cannot keep, never shorten it.
/// - `nil-removes`: an absent key reads nil; setting nil, `removeValue(forKey:)` and an update returning nil remove
///   the key, and removing an absent key is no error.
/// - `key-validation`: an empty key or one containing NUL is refused with ``Prefs/PrefsError/invalidKey(_:reason:)``
///   by every write, and nothing is written (call ``Prefs/KeyValueStore/validateKey(_:)``).
/// - `all-values`: `allValues()` holds every key set and none removed.
/// - `replace-all`: `replaceAll(_:)` makes its argument the whole content and tells observers of each key that
///   changed, once.
/// - `remove-values`: `removeValues(forKeys:)` removes the keys named, absent ones included, and keeps the others.
/// - `update-atomic`: `updateValue(forKey:_:)` never runs a transform while another caller's transform of the same
///   key runs, and concurrent increments lose nothing.
/// - `concurrent-writes`: 8 threads setting keys of their own at the same time keep every one of them: writes of
///   different keys never lose each other.
/// - `update-throw-writes-nothing`: a transform that throws leaves the value as it was, announces nothing, and its
///   error reaches the caller.
/// - `batch-at-once`: reads inside `batch(_:)` see its writes; when it returns, all of them are stored, and its
///   result is returned.
/// - `batch-rollback`: a batch whose body throws leaves every value as it was before it, announces nothing, and
///   rethrows.
/// - `batch-nested`: a batch inside a batch joins it (its observers wait for the outer one); a throwing inner batch
///   undoes only its own writes.
/// - `batch-observers-once`: observers hear of each key a batch changed once, after its body and before `batch`
///   returns, however often the body wrote the key.
/// - `delivery-exactly-once`: each change of a key is delivered to its observers once.
/// - `delivery-in-order`: the observers of a key see its values in the order they were applied, also when several
///   threads update it.
/// - `delivery-before-return`: observers of a change have run when the write (`setValue`, `updateValue`,
///   `removeValue`, `removeValues`, `replaceAll`) returns. When no change reaches an observer at all, within
///   2 seconds, the rules that wait for deliveries are skipped rather than left to time out.
/// - `delivery-outside-locks`: observers run with no lock of the store held: inside an observer of one key, a write
///   of another key from another thread completes (waited for at most 10 seconds). When it does not, the rules
///   whose `values` streams read the store from inside the delivery are skipped: on the lock the store holds, that
///   read would deadlock, or stop the process (a `Mutex`: "Recursive call to lock Mutex").
/// - `values-start-with-current`: a wrapper's `values` stream yields the stored value first, then each change.
/// - `one-stored-form`: a value written through a typed key, through a generic `Codable` wrapper and through the
///   raw API is stored in one form and reads back the same through each.
/// - `closed-store-throws`: once closed, every operation throws ``Prefs/PrefsError/storeClosed(path:)`` and writes
///   nothing. Checked only when `verify` is given `close:`.
///
/// A store that does not offer something declares it in `unsupported:` (see ``Capability``); the rules that need it
/// are skipped, and the returned ``Report`` lists them with the reason. The rules run one after another, in the
/// order of ``Rule/all``, each on a thread of its own, never blocking Swift's cooperative pool. A message shows each
/// value with its case (`.float(nan)`, not `nan`) and says what was expected.
public enum KeyValueStoreConformance {
    /// How long the kit waits for something that must happen before it reports a hang (a write of another key from
    /// inside an observer, a `values` stream's next element): a guard against a hang, never a speed requirement.
    static let hangGuard: Duration = .seconds(10)
    /// How long `delivery-before-return` waits for the observers of a write that returned before they ran, to tell a
    /// store that delivers late from one that delivers nothing.
    static let deliveryGrace: Duration = .seconds(2)

    /// `KeyValueStoreConformance.Rule.batchRollback`: one rule of the contract, with the stable name issues carry.
    public struct Rule: Hashable, Sendable, CustomStringConvertible {
        /// `rule.name` is the rule's stable name, such as `"batch-rollback"`; every issue about the rule starts with it.
        public let name: String
        /// `print(rule)` prints its name.
        public var description: String { name }

        init(_ name: String) { self.name = name }

        /// `value-round-trip`: every kind of value, extremes included, reads back exactly.
        public static let valueRoundTrip = Rule("value-round-trip")
        /// `large-values`: long strings, large data and long arrays are kept whole or refused.
        public static let largeValues = Rule("large-values")
        /// `long-keys`: long keys are kept whole and apart, or refused.
        public static let longKeys = Rule("long-keys")
        /// `concurrent-writes`: writes of different keys from several threads never lose each other.
        public static let concurrentWrites = Rule("concurrent-writes")
        /// `nil-removes`: nil removes a key; an absent key reads nil.
        public static let nilRemoves = Rule("nil-removes")
        /// `key-validation`: empty keys and keys containing NUL are refused.
        public static let keyValidation = Rule("key-validation")
        /// `all-values`: `allValues()` is the store's content.
        public static let allValues = Rule("all-values")
        /// `replace-all`: `replaceAll(_:)` makes its argument the whole content.
        public static let replaceAll = Rule("replace-all")
        /// `remove-values`: `removeValues(forKeys:)` removes exactly those keys.
        public static let removeValues = Rule("remove-values")
        /// `update-atomic`: concurrent updates of one key never interleave.
        public static let updateAtomic = Rule("update-atomic")
        /// `update-throw-writes-nothing`: a throwing transform writes and announces nothing.
        public static let updateThrowWritesNothing = Rule("update-throw-writes-nothing")
        /// `batch-at-once`: a batch's writes are seen inside it and all stored after it.
        public static let batchAtOnce = Rule("batch-at-once")
        /// `batch-rollback`: a throwing batch changes nothing.
        public static let batchRollback = Rule("batch-rollback")
        /// `batch-nested`: a nested batch joins the outer one.
        public static let batchNested = Rule("batch-nested")
        /// `batch-observers-once`: a batch's observers hear of each key once, after it.
        public static let batchObserversOnce = Rule("batch-observers-once")
        /// `delivery-exactly-once`: each change is delivered once.
        public static let deliveryExactlyOnce = Rule("delivery-exactly-once")
        /// `delivery-in-order`: a key's values are delivered in the order applied.
        public static let deliveryInOrder = Rule("delivery-in-order")
        /// `delivery-before-return`: observers have run when a write returns.
        public static let deliveryBeforeReturn = Rule("delivery-before-return")
        /// `delivery-outside-locks`: observers run without the store's locks.
        public static let deliveryOutsideLocks = Rule("delivery-outside-locks")
        /// `values-start-with-current`: `values` streams start with the stored value.
        public static let valuesStartWithCurrent = Rule("values-start-with-current")
        /// `one-stored-form`: one type has one stored form, whatever the call site.
        public static let oneStoredForm = Rule("one-stored-form")
        /// `closed-store-throws`: a closed store refuses every operation.
        public static let closedStoreThrows = Rule("closed-store-throws")

        /// Every rule, in the order `verify` checks them: the two that tell whether changes reach observers at all,
        /// and outside the store's locks, come before the rules that wait for deliveries or read from inside them.
        public static let all: [Rule] = [
            .valueRoundTrip, .largeValues, .longKeys, .nilRemoves, .keyValidation, .allValues,
            .deliveryBeforeReturn, .deliveryOutsideLocks, .replaceAll, .removeValues, .updateAtomic,
            .concurrentWrites, .updateThrowWritesNothing, .batchAtOnce, .batchRollback, .batchNested,
            .batchObserversOnce, .deliveryExactlyOnce, .deliveryInOrder, .valuesStartWithCurrent, .oneStoredForm,
            .closedStoreThrows,
        ]

        /// The rules that wait for a change to reach an observer: skipped when no change reaches one.
        static let waitingForDelivery: Set<Rule> = [
            .deliveryOutsideLocks, .replaceAll, .updateThrowWritesNothing, .batchRollback, .batchNested,
            .batchObserversOnce, .deliveryExactlyOnce, .deliveryInOrder, .valuesStartWithCurrent,
        ]

        /// The rules whose `values` streams read the store from inside a delivery: skipped when observers run
        /// under a lock of the store, where that read would deadlock or stop the process.
        static let readingInsideDelivery: Set<Rule> = [.deliveryInOrder, .valuesStartWithCurrent]
    }

    /// `unsupported: [.transactionalBatches]`: something a store may not offer; the rules that need it are skipped.
    public struct Capability: Hashable, Sendable, CustomStringConvertible {
        /// `capability.name` names it in the report, such as `"transactional batches"`.
        public let name: String
        /// The rules skipped when a store does not offer it.
        public let rules: Set<Rule>
        /// `print(capability)` prints its name.
        public var description: String { name }

        /// `Capability(name: "…", rules: [.batchRollback])`: a capability of your own naming the rules it needs.
        public init(name: String, rules: Set<Rule>) {
            self.name = name
            self.rules = rules
        }

        /// `.transactionalBatches`: `batch(_:)` applies its writes at once and takes them back when it throws. A store
        /// using the default `batch(_:)` (writes applied one by one) lacks it; the `batch-*` rules are skipped.
        public static let transactionalBatches = Capability(
            name: "transactional batches", rules: [.batchAtOnce, .batchRollback, .batchNested, .batchObserversOnce])

        /// `.exactValues`: every ``Prefs/PrefValue`` reads back bit for bit. A store over a backend that changes some
        /// values (a `Float` NaN read back as a `Double`, a date kept as text) lacks it; `value-round-trip` is skipped.
        public static let exactValues = Capability(name: "exact values", rules: [.valueRoundTrip])

        /// `.closedReads`: reads of a closed store throw too. A store that keeps serving its last known values after
        /// `close()` lacks it; `closed-store-throws` then checks the writes only.
        public static let closedReads = Capability(name: "throwing reads when closed", rules: [])

        /// `.storeClosedError`: a closed store throws ``Prefs/PrefsError/storeClosed(path:)``. A store that throws an
        /// error of its own lacks it; `closed-store-throws` then accepts any error.
        public static let storeClosedError = Capability(name: "PrefsError.storeClosed", rules: [])
    }

    /// What `verify` found: the rules it checked, those it skipped and why, and what each broken rule did wrong.
    public struct Report: Sendable {
        /// The rules run, in order.
        public internal(set) var checked: [Rule] = []
        /// The rules skipped, each with the reason: the capability the store declared unsupported, or the broken rule
        /// that made checking it pointless or unsafe (a store that delivers no change, or delivers under its lock).
        public internal(set) var skipped: [Rule: String] = [:]
        /// The broken rules, each with what went wrong (also recorded as issues).
        public internal(set) var failures: [Rule: [String]] = [:]

        /// The rules the store broke.
        public var brokenRules: Set<Rule> { Set(failures.keys) }
    }

    /// `try await KeyValueStoreConformance.verify(makeStore: { try MyStore() })` runs every rule against a fresh
    /// store and records one Swift Testing issue per broken rule, its comment starting with the rule's name.
    ///
    /// - Parameters:
    ///   - unsupported: What the store does not offer; the rules needing it are skipped and reported as such.
    ///   - close: Closes a store, for a store that can be closed: each store is closed after its rule, and
    ///     `closed-store-throws` is checked. Without it, stores are released after their rule.
    ///   - makeStore: Makes a fresh, empty store; called once per rule.
    ///   - sourceLocation: Where the issues of broken rules are recorded; by default, the call of `verify`.
    /// - Returns: The rules checked, skipped and broken.
    /// - Throws: Only `CancellationError` when the test is cancelled; broken rules are issues, not errors.
    @discardableResult
    public static func verify<Store: KeyValueStore>(
        unsupported: Set<Capability> = [],
        close: (@Sendable (Store) throws -> Void)? = nil,
        makeStore: () throws -> Store,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> Report {
        var report = Report()
        // Rules an earlier broken rule makes pointless or unsafe to run, with the reason.
        var blocked: [Rule: String] = [:]
        for rule in Rule.all {
            try Task.checkCancellation()
            if let reason = skipReason(rule, unsupported: unsupported, closes: close != nil) ?? blocked[rule] {
                report.skipped[rule] = reason
                continue
            }
            report.checked.append(rule)
            let findings = Findings()
            do {
                let store = try makeStore()
                var closeStore: (@Sendable () throws -> Void)?
                if let close { closeStore = { try close(store) } }
                let context = Context(store: store, findings: findings, unsupported: unsupported, close: closeStore)
                do { try await check(rule, context) } catch { findings.fail("unexpected error: \(error)") }
                if rule != .closedStoreThrows, let close { try close(store) }
            } catch {
                findings.fail("makeStore or close threw: \(error)")
            }
            let messages = findings.messages
            for blockedRule in findings.blockedRules where blocked[blockedRule] == nil {
                blocked[blockedRule] = findings.blockReason
            }
            guard !messages.isEmpty else { continue }
            report.failures[rule] = messages
            for message in messages {
                Issue.record(Comment(rawValue: "\(rule.name): \(message)"), sourceLocation: sourceLocation)
            }
        }
        return report
    }

    private static func skipReason(_ rule: Rule, unsupported: Set<Capability>, closes: Bool) -> String? {
        if rule == .closedStoreThrows, !closes { return "the store has no close(): verify was given no close:" }
        guard let capability = unsupported.first(where: { $0.rules.contains(rule) }) else { return nil }
        return "the store declares no \(capability.name)"
    }

    private static func check(_ rule: Rule, _ context: Context) async throws {
        switch rule {
        case .valueRoundTrip: try await onThread { try valueRoundTrip(context) }
        case .largeValues: try await onThread { try largeValues(context) }
        case .longKeys: try await onThread { try longKeys(context) }
        case .concurrentWrites: try await onThread { try concurrentWrites(context) }
        case .nilRemoves: try await onThread { try nilRemoves(context) }
        case .keyValidation: try await onThread { try keyValidation(context) }
        case .allValues: try await onThread { try allValues(context) }
        case .replaceAll: try await replaceAll(context)
        case .removeValues: try await onThread { try removeValues(context) }
        case .updateAtomic: try await onThread { try updateAtomic(context) }
        case .updateThrowWritesNothing: try await updateThrowWritesNothing(context)
        case .batchAtOnce: try await onThread { try batchAtOnce(context) }
        case .batchRollback: try await batchRollback(context)
        case .batchNested: try await onThread { try batchNested(context) }
        case .batchObserversOnce: try await batchObserversOnce(context)
        case .deliveryExactlyOnce: try await deliveryExactlyOnce(context)
        case .deliveryInOrder: try await deliveryInOrder(context)
        case .deliveryBeforeReturn: try await onThread { try deliveryBeforeReturn(context) }
        case .deliveryOutsideLocks: try await onThread { try deliveryOutsideLocks(context) }
        case .valuesStartWithCurrent: try await valuesStartWithCurrent(context)
        case .oneStoredForm: try await onThread { try oneStoredForm(context) }
        default: try await onThread { try closedStoreThrows(context) }
        }
    }
}

// MARK: - What every rule uses

extension KeyValueStoreConformance {
    /// The store a rule checks and where it notes what went wrong.
    struct Context: Sendable {
        let store: any KeyValueStore
        let findings: Findings
        let unsupported: Set<Capability>
        let close: (@Sendable () throws -> Void)?
        /// Keys unique to this run, so a store that is not empty (a shared database) does not disturb the rule.
        let prefix = "conformance.\(UUID().uuidString.prefix(8))."

        func key(_ name: String) -> String { prefix + name }
        /// A key of this run as a message shows it: without the run's prefix.
        func name(_ key: String) -> String { key.hasPrefix(prefix) ? String(key.dropFirst(prefix.count)) : key }
        func expect(_ condition: Bool, _ message: @autoclosure () -> String) {
            if !condition { findings.fail(message()) }
        }
    }

    /// The failures of one rule, and the later rules it makes pointless or unsafe to run.
    final class Findings: Sendable {
        private let list = Mutex<(messages: [String], blocked: Set<Rule>, reason: String)>(([], [], ""))
        func fail(_ message: String) { list.withLock { $0.messages.append(message) } }
        /// Skips `rules` in this run of `verify`, reporting `reason` for each.
        func block(_ rules: Set<Rule>, because reason: String) {
            list.withLock {
                $0.blocked = rules
                $0.reason = reason
            }
        }
        var messages: [String] { list.withLock { $0.messages } }
        var blockedRules: Set<Rule> { list.withLock { $0.blocked } }
        var blockReason: String { list.withLock { $0.reason } }
    }

    /// An error a rule throws from a transform or a batch body, to see it come back.
    struct Thrown: Error {}

    /// A bounded wait for something another thread does.
    final class Signal: Sendable {
        private let condition = NSCondition()
        private let raised = Atomic(false)
        func raise() {
            condition.lock()
            raised.store(true, ordering: .sequentiallyConsistent)
            condition.broadcast()
            condition.unlock()
        }
        /// Whether it was raised within `limit`.
        func wait(_ limit: Duration) -> Bool {
            let (seconds, attoseconds) = limit.components
            let deadline = Date.now.addingTimeInterval(Double(seconds) + Double(attoseconds) / 1e18)
            condition.lock()
            defer { condition.unlock() }
            while !raised.load(ordering: .sequentiallyConsistent) {
                if !condition.wait(until: deadline) { return raised.load(ordering: .sequentiallyConsistent) }
            }
            return true
        }
        var isRaised: Bool { raised.load(ordering: .sequentiallyConsistent) }
    }

    /// Runs blocking work on a thread of its own, so no rule blocks a thread of Swift's cooperative pool.
    static func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try body() }) }.start()
        }
    }

    /// Runs `body` on another thread; the returned signal is raised when it has finished.
    static func spawn(_ body: @escaping @Sendable () -> Void) -> Signal {
        let done = Signal()
        Thread {
            body()
            done.raise()
        }.start()
        return done
    }

    /// The keys a feed delivered up to (not including) a write of `sentinel`, which the caller makes after the
    /// writes it checks: what was delivered, once the writes have returned, in delivery order.
    static func delivered(
        _ stream: AsyncStream<String>, before sentinel: String, _ context: Context
    ) async throws -> [String]? {
        try await withThrowingTaskGroup(of: [String]?.self) { group in
            group.addTask {
                var keys: [String] = []
                for await key in stream {
                    if key == sentinel { return keys }
                    keys.append(key)
                }
                return nil
            }
            group.addTask {
                try await Task.sleep(for: hangGuard)
                return nil
            }
            defer { group.cancelAll() }
            guard let keys = try await group.next() ?? nil else {
                context.findings.fail(
                    "a write of \(context.name(sentinel)) was not delivered to a changedKeys stream within \(hangGuard)"
                )
                return nil
            }
            return keys
        }
    }

    /// The first elements of a stream until `done` holds, or nil after ``hangGuard``.
    static func collect<T: Sendable>(
        _ stream: AsyncStream<T>, until done: @escaping @Sendable ([T]) -> Bool
    ) async throws -> [T]? {
        try await withThrowingTaskGroup(of: [T]?.self) { group in
            group.addTask {
                var elements: [T] = []
                for await element in stream {
                    elements.append(element)
                    if done(elements) { return elements }
                }
                return elements
            }
            group.addTask {
                try await Task.sleep(for: hangGuard)
                return nil
            }
            defer { group.cancelAll() }
            return try await group.next() ?? nil
        }
    }

    /// Whether two values are the same, bit for bit where floats are concerned (NaN equals NaN, -0 differs from 0).
    static func identical(_ first: PrefValue?, _ second: PrefValue?) -> Bool {
        switch (first, second) {
        case (nil, nil): return true
        case (.float(let a)?, .float(let b)?): return a.bitPattern == b.bitPattern || (a.isNaN && b.isNaN)
        case (.double(let a)?, .double(let b)?): return a.bitPattern == b.bitPattern || (a.isNaN && b.isNaN)
        case (.array(let a)?, .array(let b)?): return a.count == b.count && zip(a, b).allSatisfy { identical($0, $1) }
        case (.dictionary(let a)?, .dictionary(let b)?):
            return Set(a.keys) == Set(b.keys) && a.allSatisfy { identical($0.value, b[$0.key]) }
        default: return first == second
        }
    }
}

// MARK: - Values as messages show them

extension KeyValueStoreConformance {
    /// `value` as Swift writes it, its case included, so that `.float(nan)` and `.double(nan)` differ: long text and
    /// data by their size and their first characters or bytes, long containers by their count and first elements.
    static func shown(_ value: PrefValue?) -> String {
        guard let value else { return "nil" }
        switch value {
        case .bool(let bool): return ".bool(\(bool))"
        case .int(let int): return ".int(\(int))"
        case .unsignedInt(let int): return ".unsignedInt(\(int))"
        case .float(let float): return ".float(\(float))"
        case .double(let double): return ".double(\(double))"
        case .string(let text):
            let size = text.utf8.count
            guard size > 80 else { return ".string(\(String(reflecting: text)))" }
            return ".string(\(size) bytes: \(String(reflecting: String(text.prefix(20))))…)"
        case .data(let data):
            let bytes = data.prefix(16).map { String(format: "%02x", $0) }.joined()
            return ".data(\(data.count) bytes\(data.isEmpty ? "" : ": " + bytes)\(data.count > 16 ? "…" : ""))"
        case .date(let date): return ".date(timeIntervalSinceReferenceDate: \(date.timeIntervalSinceReferenceDate))"
        case .array(let elements):
            let first = elements.prefix(4).map(shown).joined(separator: ", ")
            return elements.count > 4 ? ".array(\(elements.count) elements: [\(first), …])" : ".array([\(first)])"
        case .dictionary(let members):
            let first = members.sorted { $0.key < $1.key }.prefix(4)
                .map { "\(String(reflecting: $0.key)): \(shown($0.value))" }.joined(separator: ", ")
            if members.isEmpty { return ".dictionary([:])" }
            return members.count > 4
                ? ".dictionary(\(members.count) entries: [\(first), …])" : ".dictionary([\(first)])"
        }
    }

    /// "expected X, read Y", for a value read back.
    static func expected(_ wanted: PrefValue?, read: PrefValue?) -> String {
        "expected \(shown(wanted)), read \(shown(read))"
    }
}
