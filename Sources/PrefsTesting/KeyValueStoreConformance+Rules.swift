import Foundation
import Observation
import Prefs
import Synchronization

// The rules of `KeyValueStoreConformance`, one function each (see its documentation for what each promises).
extension KeyValueStoreConformance {
    /// Every kind of value with its extremes, each under its own name.
    static let samples: [(String, PrefValue)] = [
        ("true", .bool(true)), ("false", .bool(false)), ("zero", .int(0)), ("int64-min", .int(.min)),
        ("int64-max", .int(.max)), ("uint64-max", .unsignedInt(.max)), ("float", .float(0.1)),
        ("float-nan", .float(.nan)), ("float-minus-zero", .float(-0.0)), ("double", .double(0.1)),
        ("double-nan", .double(.nan)), ("double-minus-zero", .double(-0.0)),
        ("double-tiny", .double(.leastNonzeroMagnitude)),
        ("empty-string", .string("")), ("string", .string("dark")), ("unicode", .string("ünï 😀\nline \"q\"")),
        ("empty-data", .data(Data())), ("data", .data(Data((0...255).map { UInt8($0) }))),
        ("date", .date(Date(timeIntervalSinceReferenceDate: 123_456.789))),
        ("date-before-2001", .date(Date(timeIntervalSinceReferenceDate: -1_000_000.25))),
        ("empty-array", .array([])), ("empty-dictionary", .dictionary([:])),
        (
            "nested",
            .dictionary([
                "list": .array([.int(1), .string("two"), .dictionary(["three": .array([.float(3.5), .bool(false)])])]),
                "when": .date(Date(timeIntervalSinceReferenceDate: 0.5)), "bytes": .data(Data([0, 0xFF])),
            ])
        ),
    ]

    static func valueRoundTrip(_ context: Context) throws {
        let store = context.store
        for (name, value) in samples {
            try store.setValue(value, forKey: context.key(name))
            let read = try store.value(forKey: context.key(name))
            context.expect(identical(read, value), "\(name): value(forKey:) \(expected(value, read: read))")
        }
        let all = try store.allValues()
        for (name, value) in samples {
            let read = all[context.key(name)]
            context.expect(identical(read, value), "\(name): allValues() \(expected(value, read: read))")
        }
    }

    /// Values larger than a database column or a message usually holds, each under a short key of its own.
    static let largeSamples: [(key: String, name: String, value: PrefValue)] = {
        // 21 bytes a repetition, in characters of one to four bytes, so that a cut can fall inside one.
        let text = String(repeating: "ünï😀 long text, ", count: 5_000)
        let bytes = Data((0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) })
        return [
            ("large.string", "a string of \(text.utf8.count) bytes", .string(text)),
            ("large.data", "1 MiB of data", .data(bytes)),
            ("large.array", "an array of 10 000 strings", .array((0..<10_000).map { .string("element \($0)") })),
            (
                "large.dictionary", "a dictionary holding that string",
                .dictionary(["text": .string(text), "n": .int(1)])
            ),
        ]
    }()

    static func largeValues(_ context: Context) throws {
        let store = context.store
        // A write may throw (the store cannot keep the value); what it may not do is keep less of it.
        var kept: [String: PrefValue] = [:]
        for (key, _, value) in largeSamples {
            if (try? store.setValue(value, forKey: context.key(key))) != nil { kept[key] = value }
        }
        let all = try store.allValues()
        for (key, name, _) in largeSamples {
            let wanted = kept[key]
            let refused = wanted == nil ? " (its write threw)" : ""
            let read = try store.value(forKey: context.key(key))
            context.expect(identical(read, wanted), "\(name)\(refused): value(forKey:) \(expected(wanted, read: read))")
            let listed = all[context.key(key)]
            context.expect(
                identical(listed, wanted), "\(name)\(refused): allValues() \(expected(wanted, read: listed))")
        }
    }

    static func longKeys(_ context: Context) throws {
        let store = context.store
        // Pairs of keys alike but for their last character, at lengths where stores cut keys, and a pair made of
        // two-byte characters, where a cut can fall inside one.
        var keys: [String] = []
        for length in [100, 256, 1_000] {
            let stem = context.prefix + String(repeating: "k", count: length - context.prefix.utf8.count - 1)
            keys += [stem + "a", stem + "b"]
        }
        let wide = context.prefix + String(repeating: "é", count: 150)
        keys += [wide + "a", wide + "b"]
        // A key may be refused with an error; one that is stored keeps its own value.
        var kept: [String: PrefValue] = [:]
        for (index, key) in keys.enumerated() {
            if (try? store.setValue(.int(Int64(index)), forKey: key)) != nil { kept[key] = .int(Int64(index)) }
        }
        var wrong: [String] = []
        for key in keys {
            let read = try store.value(forKey: key)
            if !identical(read, kept[key]) {
                wrong.append(
                    "the key of \(key.utf8.count) bytes ending in \(key.suffix(1)) \(expected(kept[key], read: read))")
            }
        }
        context.expect(
            wrong.isEmpty,
            "keys alike but for their last character did not stay apart: \(wrong.prefix(3).joined(separator: "; "))"
                + (wrong.count > 3 ? "; and \(wrong.count - 3) more" : ""))
        let listed = try store.allValues().filter { $0.key.hasPrefix(context.prefix) }
        context.expect(
            listed == kept,
            "allValues() lists keys of \(listed.keys.map(\.utf8.count).sorted()) bytes, expected \(kept.keys.map(\.utf8.count).sorted())"
        )
    }

    static func nilRemoves(_ context: Context) throws {
        let store = context.store
        let key = context.key("removed")
        let unwritten = try store.value(forKey: key)
        context.expect(unwritten == nil, "a key never written: \(expected(nil, read: unwritten))")
        try store.setValue(nil, forKey: key)
        try store.removeValue(forKey: key)
        let removals: [(String, () throws -> Void)] = [
            ("setValue(nil, forKey:)", { try store.setValue(nil, forKey: key) }),
            ("removeValue(forKey:)", { try store.removeValue(forKey: key) }),
            ("an updateValue transform returning nil", { try store.updateValue(forKey: key) { _ in nil } }),
        ]
        for (name, remove) in removals {
            try store.setValue(.int(1), forKey: key)
            try remove()
            let read = try store.value(forKey: key)
            context.expect(read == nil, "\(name) left the key readable: \(expected(nil, read: read))")
            let listed = try store.allValues()[key]
            context.expect(listed == nil, "\(name) left the key in allValues(): \(expected(nil, read: listed))")
        }
    }

    static func keyValidation(_ context: Context) throws {
        let store = context.store
        let kept = context.key("kept")
        try store.setValue(.int(1), forKey: kept)
        for bad in ["", "a\u{0}b"] {
            let writes: [(String, () throws -> Void)] = [
                ("setValue", { try store.setValue(.int(1), forKey: bad) }),
                ("updateValue", { try store.updateValue(forKey: bad) { _ in .int(1) } }),
                ("replaceAll", { try store.replaceAll([bad: .int(1)]) }),
            ]
            for (name, write) in writes {
                expectError("\(name) of the key \(String(reflecting: bad))", "invalidKey", context, write) {
                    guard case .invalidKey? = $0 as? PrefsError else { return false }
                    return true
                }
            }
            let stored = try store.allValues()[bad]
            context.expect(stored == nil, "the key \(String(reflecting: bad)) was stored: \(shown(stored))")
        }
        let read = try store.value(forKey: kept)
        context.expect(read == .int(1), "a refused replaceAll changed the store: \(expected(.int(1), read: read))")
    }

    static func allValues(_ context: Context) throws {
        let store = context.store
        let written: [String: PrefValue] = [
            context.key("a"): .int(1), context.key("b"): .string("two"), context.key("c"): .array([.bool(true)]),
        ]
        for (key, value) in written { try store.setValue(value, forKey: key) }
        try store.removeValue(forKey: context.key("b"))
        let all = try store.allValues()
        for name in ["a", "b", "c"] {
            let wanted = name == "b" ? nil : written[context.key(name)]
            let listed = all[context.key(name)]
            context.expect(
                listed == wanted,
                "allValues() after setting a, b, c and removing b, for \(name): \(expected(wanted, read: listed))")
        }
    }

    static func replaceAll(_ context: Context) async throws {
        let store = context.store
        let (a, b, c, sentinel) = (context.key("a"), context.key("b"), context.key("c"), context.key("sentinel"))
        try await onThread {
            try store.setValue(.int(1), forKey: a)
            try store.setValue(.int(2), forKey: b)
        }
        let stream = store.changes.keys([a, b, c, sentinel])
        let replacement: [String: PrefValue] = [b: .int(20), c: .string("three")]
        try await onThread {
            try store.replaceAll(replacement)
            // Only this run's keys: values from elsewhere (defaults registered with Foundation) may read too.
            let all = try store.allValues().filter { $0.key.hasPrefix(context.prefix) }
            context.expect(
                all == replacement,
                "after replaceAll the store holds \(shown(.dictionary(all))), expected \(shown(.dictionary(replacement)))"
            )
            try store.setValue(.int(1), forKey: sentinel)
        }
        guard let keys = try await delivered(stream, before: sentinel, context) else { return }
        context.expect(
            keys.sorted() == [a, b, c].sorted(),
            "replaceAll of {a: 1, b: 2} by {b: 20, c: \"three\"} announced \(keys.map(context.name)), expected a, b and c once each"
        )
    }

    static func removeValues(_ context: Context) throws {
        let store = context.store
        for name in ["a", "b", "c"] { try store.setValue(.string(name), forKey: context.key(name)) }
        try store.removeValues(forKeys: [context.key("a"), context.key("b"), context.key("absent")])
        for name in ["a", "b", "c"] {
            let wanted: PrefValue? = name == "c" ? .string("c") : nil
            let read = try store.value(forKey: context.key(name))
            context.expect(
                read == wanted, "removeValues(forKeys: [a, b, absent]), then \(name): \(expected(wanted, read: read))")
        }
    }

    static func updateAtomic(_ context: Context) throws {
        let store = context.store
        let key = context.key("counter")
        try store.setValue(.int(0), forKey: key)
        // One update holds its transform open until a second caller's transform starts, or for a while: with an
        // atomic update the second one cannot start before the first ends.
        let firstInside = Signal()
        let secondInside = Signal()
        let overlapped = Atomic(false)
        let first = spawn {
            _ = try? store.updateValue(forKey: key) { current in
                firstInside.raise()
                if secondInside.wait(.milliseconds(500)) { overlapped.store(true, ordering: .sequentiallyConsistent) }
                return increment(current)
            }
        }
        let second = spawn {
            guard firstInside.wait(hangGuard) else { return }
            _ = try? store.updateValue(forKey: key) { current in
                secondInside.raise()
                return increment(current)
            }
        }
        context.expect(first.wait(hangGuard * 3) && second.wait(hangGuard * 3), "two updates did not finish")
        context.expect(
            !overlapped.load(ordering: .sequentiallyConsistent),
            "a transform ran while another caller's transform of the same key was running")
        let threads = 4
        let rounds = 50
        let done = (0..<threads).map { _ in
            spawn { for _ in 0..<rounds { _ = try? store.updateValue(forKey: key, increment) } }
        }
        context.expect(done.allSatisfy { $0.wait(hangGuard * 6) }, "concurrent updates did not finish")
        let final = try store.value(forKey: key)
        let wanted = PrefValue.int(Int64(2 + threads * rounds))
        context.expect(
            final == wanted,
            "\(threads) threads each adding 1 \(rounds) times after 2: \(expected(wanted, read: final))")
    }

    static func concurrentWrites(_ context: Context) throws {
        let store = context.store
        let (threads, keysEach) = (8, 40)
        let start = Signal()
        let failures = Mutex<[String]>([])
        let done = (0..<threads).map { thread in
            spawn {
                guard start.wait(hangGuard) else { return }
                for index in 0..<keysEach {
                    do {
                        try store.setValue(
                            .int(Int64(thread * keysEach + index)), forKey: context.key("w\(thread).\(index)"))
                    } catch {
                        failures.withLock { $0.append("\(error)") }
                    }
                }
            }
        }
        start.raise()  // all at once
        context.expect(done.allSatisfy { $0.wait(hangGuard * 6) }, "\(threads) threads setting keys did not finish")
        let thrown = failures.withLock { $0 }
        context.expect(thrown.isEmpty, "\(thrown.count) writes threw, the first \(thrown.first ?? "")")
        var lost: [String] = []
        for thread in 0..<threads {
            for index in 0..<keysEach {
                let key = context.key("w\(thread).\(index)")
                if try store.value(forKey: key) != .int(Int64(thread * keysEach + index)) {
                    lost.append(context.name(key))
                }
            }
        }
        let total = threads * keysEach
        context.expect(
            lost.isEmpty,
            "\(threads) threads each setting \(keysEach) keys of their own at once: \(total - lost.count) of \(total) kept, "
                + "expected all; lost \(lost.prefix(4).joined(separator: ", "))\(lost.count > 4 ? ", …" : ""): "
                + "writes of different keys lose each other (a read-modify-write of the whole content without a lock?)")
    }

    private static func increment(_ value: PrefValue?) -> PrefValue? {
        if case .int(let count)? = value { return .int(count + 1) }
        return .int(1)
    }

    static func updateThrowWritesNothing(_ context: Context) async throws {
        let store = context.store
        let (kept, absent, sentinel) = (context.key("kept"), context.key("absent"), context.key("sentinel"))
        try await onThread { try store.setValue(.int(1), forKey: kept) }
        let stream = store.changes.keys([kept, absent, sentinel])
        try await onThread {
            for key in [kept, absent] {
                expectRethrows("updateValue", context) { try store.updateValue(forKey: key) { _ in throw Thrown() } }
            }
            let read = try store.value(forKey: kept)
            context.expect(read == .int(1), "a throwing transform changed the value: \(expected(.int(1), read: read))")
            let created = try store.value(forKey: absent)
            context.expect(created == nil, "a throwing transform wrote an absent key: \(expected(nil, read: created))")
            try store.setValue(.int(1), forKey: sentinel)
        }
        guard let keys = try await delivered(stream, before: sentinel, context) else { return }
        context.expect(keys.isEmpty, "a throwing transform announced \(keys.map(context.name)), expected nothing")
    }

    /// Notes a failure unless `operation` throws an error that `matches` accepts (`expected` names it).
    private static func expectError(
        _ name: String, _ expected: String, _ context: Context, _ operation: () throws -> Void,
        matches: (any Error) -> Bool
    ) {
        do {
            try operation()
            context.findings.fail("\(name) did not throw, expected \(expected)")
        } catch {
            if !matches(error) {
                context.findings.fail("\(name) threw \(String(reflecting: error)), expected \(expected)")
            }
        }
    }

    /// Notes a failure unless `operation` throws the error its closure threw (``Thrown``).
    private static func expectRethrows(_ name: String, _ context: Context, _ operation: () throws -> Void) {
        do {
            try operation()
            context.findings.fail("\(name) returned although the closure it ran threw")
        } catch is Thrown {
        } catch {
            context.findings.fail("\(name) threw \(String(reflecting: error)), expected the error its closure threw")
        }
    }

    static func batchAtOnce(_ context: Context) throws {
        let store = context.store
        let (a, b) = (context.key("a"), context.key("b"))
        let result = try store.batch {
            try store.setValue(.int(1), forKey: a)
            try store.setValue(.string("two"), forKey: b)
            context.expect(
                try store.value(forKey: a) == .int(1) && store.value(forKey: b) == .string("two"),
                "reads inside a batch do not see its writes")
            return 42
        }
        context.expect(result == 42, "batch returned \(result), expected its body's result, 42")
        let after = (try store.value(forKey: a), try store.value(forKey: b))
        context.expect(
            after == (.int(1), .string("two")),
            "after a batch setting a to 1 and b to \"two\", a is \(shown(after.0)) and b \(shown(after.1))")
    }

    static func batchRollback(_ context: Context) async throws {
        let store = context.store
        let (a, b, sentinel) = (context.key("a"), context.key("b"), context.key("sentinel"))
        let wrapper = StoredValue(key: a, default: 0, store: store)
        try await onThread { try store.setValue(.int(1), forKey: a) }
        let stream = store.changes.keys([a, b, sentinel])
        try await onThread {
            expectRethrows("batch", context) {
                try store.batch {
                    try store.setValue(.int(2), forKey: a)
                    try store.setValue(.int(3), forKey: b)
                    _ = wrapper.wrappedValue  // a cached read inside the batch must not outlive it
                    throw Thrown()
                }
            }
            let (readA, readB) = (try store.value(forKey: a), try store.value(forKey: b))
            context.expect(
                readA == .int(1), "a throwing batch kept a change of a value: \(expected(.int(1), read: readA))")
            context.expect(readB == nil, "a throwing batch kept a new key: \(expected(nil, read: readB))")
            let wrapped = wrapper.wrappedValue
            context.expect(
                wrapped == 1,
                "a wrapper that read 2 inside a batch that threw still reads \(wrapped), expected 1: the store must tell "
                    + "its changes.apply(locking:) the keys it takes back, changes.invalidate(_:) (and the keys a batch "
                    + "writes before it commits)"
            )
            try store.setValue(.int(1), forKey: sentinel)
        }
        guard let keys = try await delivered(stream, before: sentinel, context) else { return }
        context.expect(keys.isEmpty, "a throwing batch announced \(keys.map(context.name)), expected nothing")
    }

    static func batchNested(_ context: Context) throws {
        let store = context.store
        let (a, b, c) = (context.key("a"), context.key("b"), context.key("c"))
        let observedC = StoredValue(key: c, default: 0, store: store)
        let probe = ObserverProbe(observedC)
        try store.batch {
            try store.setValue(.int(1), forKey: a)
            do {
                try store.batch {
                    try store.setValue(.int(2), forKey: b)
                    try store.setValue(.int(10), forKey: a)
                    throw Thrown()
                }
            } catch is Thrown {}
            let (readA, readB) = (try store.value(forKey: a), try store.value(forKey: b))
            context.expect(
                readA == .int(1),
                "a throwing inner batch's write of a key the outer one wrote was kept: \(expected(.int(1), read: readA))"
            )
            context.expect(readB == nil, "a throwing inner batch kept its write: \(expected(nil, read: readB))")
            try store.batch { try store.setValue(.int(3), forKey: c) }
            context.expect(probe.runs == 0, "observers ran when an inner batch ended, before the outer one")
        }
        context.expect(probe.runs == 1, "observers of a nested batch's write ran \(probe.runs) times, expected once")
        context.expect(
            try store.value(forKey: a) == .int(1) && store.value(forKey: b) == nil && store.value(forKey: c) == .int(3),
            "after nested batches the store holds \(shown(.dictionary((try? store.allValues())?.filter { $0.key.hasPrefix(context.prefix) } ?? [:]))), expected a: 1 and c: 3"
        )
    }

    static func batchObserversOnce(_ context: Context) async throws {
        let store = context.store
        let (a, b, sentinel) = (context.key("a"), context.key("b"), context.key("sentinel"))
        let observed = StoredValue(key: a, default: 0, store: store)
        let stream = store.changes.keys([a, b, sentinel])
        try await onThread {
            let probe = ObserverProbe(observed)
            try store.batch {
                try store.setValue(.int(1), forKey: a)
                try store.setValue(.int(1), forKey: b)
                try store.setValue(.int(2), forKey: a)
                context.expect(probe.runs == 0, "observers ran inside the batch, before it ended")
            }
            context.expect(probe.runs == 1, "observers had run \(probe.runs) times when batch returned, expected once")
            try store.setValue(.int(1), forKey: sentinel)
        }
        guard let keys = try await delivered(stream, before: sentinel, context) else { return }
        context.expect(
            keys.sorted() == [a, b].sorted(),
            "a batch writing a twice and b once announced \(keys.map(context.name)), expected a and b once each")
    }

    static func deliveryExactlyOnce(_ context: Context) async throws {
        let store = context.store
        let (key, sentinel) = (context.key("k"), context.key("sentinel"))
        let stream = store.changes.keys([key, sentinel])
        let writes = 20
        try await onThread {
            for value in 1...writes / 2 { try store.setValue(.int(Int64(value)), forKey: key) }
            for _ in 0..<writes / 2 { try store.updateValue(forKey: key, increment) }
            try store.setValue(.int(1), forKey: sentinel)
        }
        guard let keys = try await delivered(stream, before: sentinel, context) else { return }
        context.expect(
            keys.count == writes, "\(writes) changes of a key were delivered \(keys.count) times, expected \(writes)")
    }

    static func deliveryInOrder(_ context: Context) async throws {
        let store = context.store
        let key = context.key("k")
        let wrapper = StoredValue(key: key, default: 0, store: store)
        let stream = wrapper.values
        let total = 60
        try await onThread {
            for value in 1...total / 3 { try store.setValue(.int(Int64(value)), forKey: key) }
            // Two threads updating at once: each value applied is one more than the one before it.
            let done = (0..<2).map { _ in
                spawn { for _ in 0..<total / 3 { _ = try? store.updateValue(forKey: key, increment) } }
            }
            context.expect(done.allSatisfy { $0.wait(hangGuard * 3) }, "concurrent updates did not finish")
        }
        let final = try await onThread { wrapper.wrappedValue }
        guard let seen = try await collect(stream, until: { $0.last == final }) else {
            context.findings.fail("the values stream did not reach the last value written, \(final)")
            return
        }
        context.expect(
            zip(seen, seen.dropFirst()).allSatisfy { $0 < $1 },
            "values applied in increasing order were delivered as \(seen), expected each greater than the one before")
    }

    static func deliveryBeforeReturn(_ context: Context) throws {
        let store = context.store
        let key = context.key("k")
        let wrapper = StoredValue(key: key, default: 0, store: store)
        // First, whether a change reaches an observer at all: the rules that wait for one would otherwise each wait
        // out their hang guards and blame something else.
        let first = ObserverProbe(wrapper)
        try store.setValue(.int(1), forKey: key)
        if first.runs == 0 {
            let reason = "not checked: no change of the store reaches an observer (\(Rule.deliveryBeforeReturn))"
            if store.changes.hasUndeliveredAnnouncements() {
                context.findings.fail(
                    "setValue returned with its change announced (changes.announce) but never delivered: no observer "
                        + "ran; apply each change through changes.apply(locking:), which delivers once it has released "
                        + "the store's lock (or call changes.deliverAnnouncements() then), before the write returns")
                context.findings.block(Rule.waitingForDelivery, because: reason)
                return
            }
            guard first.ran.wait(deliveryGrace) else {
                context.findings.fail(
                    "no observer ran when setValue returned, nor within \(deliveryGrace) after: the store announces "
                        + "nothing; apply each change through changes.apply(locking:) and announce it there, "
                        + "changes.announce(_:), or call changes.publish(changedKeys:)")
                context.findings.block(Rule.waitingForDelivery, because: reason)
                return
            }
            context.findings.fail(
                "observers of setValue had not run when it returned; they ran later, on another thread: deliver on "
                    + "the writing thread before returning (changes.apply(locking:) does)")
        }
        let writes: [(String, () throws -> Void)] = [
            ("updateValue", { try store.updateValue(forKey: key, increment) }),
            ("removeValue", { try store.removeValue(forKey: key) }),
            ("setValue after a removal", { try store.setValue(.int(5), forKey: key) }),
            ("removeValues", { try store.removeValues(forKeys: [key]) }),
            ("replaceAll", { try store.replaceAll([key: .int(7)]) }),
        ]
        for (name, write) in writes {
            let probe = ObserverProbe(wrapper)
            try write()
            context.expect(
                probe.runs == 1, "observers had run \(probe.runs) times when \(name) returned, expected once")
        }
    }

    static func deliveryOutsideLocks(_ context: Context) throws {
        let store = context.store
        let (observed, other) = (context.key("observed"), context.key("other"))
        let wrapper = StoredValue(key: observed, default: 0, store: store)
        let writeDone = Signal()
        let observerRan = Signal()
        let completed = Atomic(false)
        withObservationTracking {
            _ = wrapper.wrappedValue
        } onChange: {
            observerRan.raise()
            // Inside the observer: another thread writes another key and reads this one.
            let done = spawn {
                _ = try? store.setValue(.int(1), forKey: other)
                _ = try? store.value(forKey: observed)
                writeDone.raise()
            }
            completed.store(done.wait(hangGuard), ordering: .sequentiallyConsistent)
        }
        try store.setValue(.int(1), forKey: observed)
        guard observerRan.isRaised else {
            context.findings.fail(
                "the observer of a setValue had not run when it returned, so whether it runs under a lock is unknown "
                    + "(see \(Rule.deliveryBeforeReturn))")
            return
        }
        guard completed.load(ordering: .sequentiallyConsistent) else {
            context.findings.fail(
                "inside an observer of one key, a write of another key from another thread did not complete within "
                    + "\(hangGuard): the store delivers its changes (changes.deliverAnnouncements() or "
                    + "changes.publish(changedKeys:)) while holding a lock that writes need; hold it only inside "
                    + "changes.apply(locking:), which delivers after releasing it. "
                    + "Observers read the store on the delivering thread, where a non-recursive lock deadlocks, or stops "
                    + "the process (Mutex: \"Recursive call to lock Mutex\")")
            context.findings.block(
                Rule.readingInsideDelivery,
                because: "not checked: observers run under a lock of the store (\(Rule.deliveryOutsideLocks)), where "
                    + "a values stream's read of the store would deadlock or stop the process")
            _ = writeDone.wait(hangGuard)
            return
        }
        _ = writeDone.wait(hangGuard)
    }

    static func valuesStartWithCurrent(_ context: Context) async throws {
        let store = context.store
        let key = context.key("k")
        try await onThread { try store.setValue(.int(5), forKey: key) }
        let wrapper = StoredValue(key: key, default: 0, store: store)
        let stream = wrapper.values
        try await onThread { try store.setValue(.int(6), forKey: key) }
        let seen = try await collect(stream, until: { $0.count == 2 })
        context.expect(
            seen == [5, 6],
            "a values stream made while 5 was stored, then 6 written, yielded \(seen ?? []), expected [5, 6]")
    }

    static func closedStoreThrows(_ context: Context) throws {
        guard let close = context.close else { return }
        let store = context.store
        let key = context.key("k")
        try store.setValue(.int(1), forKey: key)
        try close()
        var operations: [(String, () throws -> Void)] = [
            ("setValue", { try store.setValue(.int(2), forKey: key) }),
            ("setValue(nil)", { try store.setValue(nil, forKey: key) }),
            ("updateValue", { try store.updateValue(forKey: key) { _ in .int(3) } }),
            ("replaceAll", { try store.replaceAll([key: .int(4)]) }),
            ("removeValues", { try store.removeValues(forKeys: [key]) }),
            ("batch", { try store.batch { try store.setValue(.int(5), forKey: key) } }),
        ]
        if !context.unsupported.contains(.closedReads) {
            operations += [
                ("value(forKey:)", { _ = try store.value(forKey: key) }),
                ("allValues", { _ = try store.allValues() }),
            ]
        }
        let anyError = context.unsupported.contains(.storeClosedError)
        for (name, operation) in operations {
            expectError("\(name) on a closed store", "storeClosed", context, operation) {
                if anyError { return true }
                guard case .storeClosed? = $0 as? PrefsError else { return false }
                return true
            }
        }
    }
}

// MARK: - One stored form

extension KeyValueStoreConformance {
    static func oneStoredForm(_ context: Context) throws {
        try sameForm("projected", other: "other", "string", context)
        try sameForm(42, other: 7, "int", context)
        try sameForm(2.5, other: 1, "double", context)
        try sameForm(true, other: false, "bool", context)
        try sameForm(
            Date(timeIntervalSinceReferenceDate: 1234.5), other: Date(timeIntervalSinceReferenceDate: 0), "date",
            context)
        try sameForm(["swift", "linux"], other: [], "string-array", context)
        try sameForm(["a": 1], other: [:], "dictionary", context)
    }

    /// Writes `value` through a typed key, a generic `Codable` wrapper and the raw API, each under a key of its own:
    /// each must store the type's own form, and each path must read what the others wrote.
    private static func sameForm<Value: PrefValueConvertible & Codable & Equatable>(
        _ value: Value, other: Value, _ name: String, _ context: Context
    ) throws {
        let store = context.store
        let native = try value.prefValue
        let paths: [(String, (String) throws -> Void)] = [
            ("the raw API", { key in try store.setValue(native, forKey: key) }),
            ("a typed key", { key in try store.set(value, for: PrefKey(key, default: other)) }),
            (
                "a generic Codable wrapper",
                { key in try writeThroughCodable(value, other: other, key: key, store: store) }
            ),
        ]
        var rawForm: PrefValue?
        for (index, (path, write)) in paths.enumerated() {
            let key = context.key("\(name).\(index)")
            try write(key)
            // The raw API's write is the reference: the store may keep a value in a form of its own.
            let stored = try store.value(forKey: key)
            if index == 0 { rawForm = stored }
            context.expect(
                identical(stored, rawForm),
                "\(name) written through \(path) is stored as \(shown(stored)), expected the form the raw API stores, \(shown(rawForm))"
            )
            let typed = try store.value(for: PrefKey(key, default: other))
            context.expect(
                typed == value,
                "\(name) \(value) written through \(path), stored as \(shown(stored)), reads \(typed) through a typed key, expected \(value)"
            )
            let generic = try readThroughCodable(key: key, other: other, store: store)
            context.expect(
                generic == value,
                "\(name) \(value) written through \(path), stored as \(shown(stored)), reads \(generic) through a generic wrapper, expected \(value)"
            )
        }
    }

    /// What generic code (`final class Model<Value: Codable>`) does: knows only that the value is `Codable`.
    private static func writeThroughCodable<Value: Codable & Sendable & Equatable>(
        _ value: Value, other: Value, key: String, store: any KeyValueStore
    ) throws {
        try store.set(value, for: PrefKey(key, default: other))
    }

    private static func readThroughCodable<Value: Codable & Sendable & Equatable>(
        key: String, other: Value, store: any KeyValueStore
    ) throws -> Value {
        StoredValue(key: key, default: other, store: store).wrappedValue
    }
}

/// Counts the runs of an Observation observer of one wrapper, registered when it is made.
final class ObserverProbe: Sendable {
    private let count = Atomic(0)
    /// Raised when the observer runs.
    let ran = KeyValueStoreConformance.Signal()

    init(_ wrapper: StoredValue<Int>) {
        withObservationTracking {
            _ = wrapper.wrappedValue
        } onChange: { [self] in
            count.add(1, ordering: .sequentiallyConsistent)
            ran.raise()
        }
    }

    var runs: Int { count.load(ordering: .sequentiallyConsistent) }
}
