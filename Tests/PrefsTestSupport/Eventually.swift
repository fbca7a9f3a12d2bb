import Foundation

/// `try eventually("the watcher to load the new file") { try store.value(forKey: "k") == .int(2) }` returns once
/// `condition` holds, looking every 2 ms.
///
/// The one polling helper of the tests, for what has no event to wait on (another process's file, a child's
/// effect). `limit` only guards against a hang: past it, `TimedOut` names what the test waited for. Blocks the
/// calling thread, so call it from a suite with `.ownThreads` (never from Swift's shared pool).
public func eventually(
    _ what: String, within limit: Duration = .seconds(120), _ condition: () throws -> Bool
) throws {
    let deadline = ContinuousClock.now + limit
    while try !condition() {
        guard ContinuousClock.now < deadline else { throw TimedOut(what) }
        usleep(2_000)
    }
}

/// `try await eventually("the listener to reconnect") { … }`: the same for asynchronous tests, pausing with
/// `Task.sleep` between looks.
public func eventually(
    _ what: String, within limit: Duration = .seconds(120), _ condition: () throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + limit
    while try !condition() {
        guard ContinuousClock.now < deadline else { throw TimedOut(what) }
        try await Task.sleep(for: .milliseconds(2))
    }
}
