import Foundation
import Observation
import Prefs
import Synchronization

// The rules of `KeyValueStoreConformance` about read-modify-write and concurrent writes, and the helpers that
// check an error was thrown.
extension KeyValueStoreConformance {
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

    static func increment(_ value: PrefValue?) -> PrefValue? {
        if case .int(let count)? = value { return .int(count + 1) }
        return .int(1)
    }

    static func updateThrowWritesNothing(_ context: Context) async throws {
        let store = context.store
        let (kept, absent, sentinel) = (context.key("kept"), context.key("absent"), context.key("sentinel"))
        try await onThread { try store.setValue(.int(1), forKey: kept) }
        let stream = store.changedKeys([kept, absent, sentinel])
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
    static func expectError(
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
    static func expectRethrows(_ name: String, _ context: Context, _ operation: () throws -> Void) {
        do {
            try operation()
            context.findings.fail("\(name) returned although the closure it ran threw")
        } catch is Thrown {
        } catch {
            context.findings.fail("\(name) threw \(String(reflecting: error)), expected the error its closure threw")
        }
    }
}
