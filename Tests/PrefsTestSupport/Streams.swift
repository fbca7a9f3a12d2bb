/// What a test waited for did not happen within the limit that guards it against a hang.
public struct TimedOut: Error, CustomStringConvertible {
    /// What the test was waiting for.
    public let what: String

    public init(_ what: String = "a stream to yield") { self.what = what }

    public var description: String { "timed out waiting for \(what)" }
}

/// Takes the first `count` elements of a stream, failing after `seconds` (a guard, not a synchronisation: the
/// default leaves room for the collecting task to wait for one of Swift Testing's shared threads while other tests
/// block them).
public func first<T: Sendable>(_ count: Int, of stream: AsyncStream<T>, within seconds: Double = 60) async throws
    -> [T]
{
    try await collect(stream, within: seconds) { $0.count == count }
}

/// The elements of a stream up to the one after which `done` holds of all collected so far, failing after
/// `seconds` (a guard, not a synchronisation).
public func collect<T: Sendable>(
    _ stream: AsyncStream<T>, within seconds: Double = 60, until done: @escaping @Sendable ([T]) -> Bool
) async throws -> [T] {
    try await withThrowingTaskGroup(of: [T]?.self) { group in
        group.addTask {
            var collected: [T] = []
            for await element in stream {
                collected.append(element)
                if done(collected) { break }
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
public func waitUntil<T: Sendable>(
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
