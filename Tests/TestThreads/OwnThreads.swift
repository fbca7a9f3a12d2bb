import Foundation
public import Testing

/// Runs each test of a suite on threads of its own, never on the few threads of Swift's cooperative pool.
///
/// Write `@Suite(.ownThreads)` (or add it to a suite's other traits). Nested suites and every test case inherit it.
///
/// Why: Swift Testing runs every test body on the cooperative pool, which has as many threads as the machine has
/// cores (two here). A test that blocks one of them (waiting for a child process, deriving a key, reading a pipe)
/// holds up every async step of every other test, so a step bounded by a server-side limit, or a hang guard, could
/// run out because of what other tests did. With this trait the body, and every child task it starts, runs on an
/// executor whose threads belong to that test alone (``TestThreadsExecutor``), and the pool stays free for the
/// library's own tasks. How many tests run at once is bounded by a gate (`PREFS_TEST_WIDTH`, default twice the
/// cores), so the machine is shared as before and not by hundreds of tests at once.
public struct OwnThreadsTrait: SuiteTrait, TestTrait, TestScoping {
    public var isRecursive: Bool { true }

    public func scopeProvider(for test: Test, testCase: Test.Case?) -> Self? {
        testCase == nil ? nil : self
    }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        await TestGate.shared.enter()
        defer { TestGate.shared.leave() }
        try await onOwnThreads(function)
    }
}

extension Trait where Self == OwnThreadsTrait {
    /// `@Suite(.ownThreads)`: every test of the suite runs on threads of its own (see ``OwnThreadsTrait``).
    public static var ownThreads: Self { OwnThreadsTrait() }
}

/// Runs `body`, and the child tasks it starts, on threads of their own rather than on the cooperative pool.
public func onOwnThreads<T>(_ body: () async throws -> T) async throws -> T {
    let executor = TestThreadsExecutor()
    defer { executor.stop() }
    return try await withTaskExecutorPreference(executor) { try await body() }
}

/// A task executor with threads of its own that never lets a job wait behind a blocked one: a job that arrives
/// while every thread is busy gets a new thread. A test's child task that blocks until a sibling has run (a
/// reader waiting for a writer) therefore cannot deadlock it, as it could on a one-thread executor.
public final class TestThreadsExecutor: TaskExecutor, @unchecked Sendable {
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []  // guarded by condition
    private var idle = 0  // threads waiting for a job; guarded by condition
    private var stopped = false  // guarded by condition

    public init() {}

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        if stopped {
            condition.unlock()
            // A task started in the body keeps the preference after it ended: such a job gets a thread that ends
            // with it.
            Self.start { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
            return
        }
        jobs.append(job)
        let needsThread = jobs.count > idle
        condition.broadcast()
        condition.unlock()
        if needsThread { Self.start { self.run() } }
    }

    /// Lets the threads end once the jobs enqueued so far have run.
    public func stop() {
        condition.lock()
        stopped = true
        condition.broadcast()
        condition.unlock()
    }

    private func run() {
        condition.lock()
        while true {
            if !jobs.isEmpty {
                let job = jobs.removeFirst()
                condition.unlock()
                job.runSynchronously(on: asUnownedTaskExecutor())
                condition.lock()
                continue
            }
            if stopped { break }
            idle += 1
            condition.wait()
            idle -= 1
        }
        condition.unlock()
    }

    /// Starts a thread with the stack a pool thread has (8 MiB): some tests decode deeply nested values.
    private static func start(_ body: @escaping @Sendable () -> Void) {
        let thread = Thread(block: body)
        thread.stackSize = 8 << 20
        thread.start()
    }
}

/// At most `width` tests at once; the others wait without holding a thread. An `NSLock`, which ThreadSanitizer
/// understands (it does not see `Mutex` from Synchronization, whose lock it cannot intercept).
final class TestGate: @unchecked Sendable {
    static let shared = TestGate(
        width: ProcessInfo.processInfo.environment["PREFS_TEST_WIDTH"].flatMap(Int.init)
            ?? max(2, 2 * ProcessInfo.processInfo.activeProcessorCount))

    private let lock = NSLock()
    private var free: Int  // guarded by lock
    private var waiting: [CheckedContinuation<Void, Never>] = []  // guarded by lock

    init(width: Int) { free = max(1, width) }

    func enter() async {
        await withCheckedContinuation { continuation in
            lock.lock()
            let admitted = free > 0
            if admitted { free -= 1 } else { waiting.append(continuation) }
            lock.unlock()
            if admitted { continuation.resume() }
        }
    }

    func leave() {
        lock.lock()
        let next = waiting.isEmpty ? nil : waiting.removeFirst()
        if next == nil { free += 1 }
        lock.unlock()
        next?.resume()
    }
}
