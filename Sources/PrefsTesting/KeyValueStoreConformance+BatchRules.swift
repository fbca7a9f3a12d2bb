import Foundation
import Observation
import Prefs
import Synchronization

// The rules of `KeyValueStoreConformance` about batches: applied at once, taken back whole, nested, observed once.
extension KeyValueStoreConformance {
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
        let stream = store.changedKeys([a, b, sentinel])
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
                "a wrapper that read 2 inside a batch that threw still reads \(wrapped), expected 1"
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
        let stream = store.changedKeys([a, b, sentinel])
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
}
