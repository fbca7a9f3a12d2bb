package import Foundation
package import Prefs
import PrefsTestSupport
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The system's file system with a test's hand on it, as SQLite's test VFS is: a test stops a store's engine at a
/// named step of a read or a commit (``pause(at:)``), does what another process would do meanwhile, and lets it
/// go on; or makes a step fail (``fail(at:with:)``), or run something there (``run(at:_:)``). Races are played
/// step by step instead of hoped for. Each instruction holds for the next time the step is reached.
///
/// Made with `watching: false`, the engine hears of no change on its own: the test calls for a look when it wants
/// one, so that what another writer does in between is not seen before the test says so.
package final class SteppingFileSystem: PassThroughFileSystem {
    /// The steps a test can stop at.
    package enum Step: Hashable, Sendable, CustomStringConvertible {
        /// A write holds the file's lock.
        case afterLock
        /// A look has read the file (before it is decoded).
        case afterRead
        /// A commit's temporary file is written and checked, just before the rename.
        case beforeRename
        /// The rename is done (before the folder is synced).
        case afterRename
        /// Just before the folder is synced.
        case beforeFolderSync

        package var description: String {
            switch self {
            case .afterLock: "after the lock"
            case .afterRead: "after the read"
            case .beforeRename: "before the rename"
            case .afterRename: "after the rename"
            case .beforeFolderSync: "before the folder sync"
            }
        }
    }

    private enum Instruction {
        case pause(Gate)
        case fail(SystemCallError)
        case run(@Sendable () -> Void)
    }

    package let base = POSIXFileSystem()
    private let instructions = Mutex<[Step: [Instruction]]>([:])
    package let watching: Bool

    package init(watching: Bool = true) {
        self.watching = watching
    }

    /// Stops the next engine that reaches `step` there until the returned gate is opened.
    package func pause(at step: Step) -> Gate {
        let gate = Gate(step: step)
        instructions.withLock { $0[step, default: []].append(.pause(gate)) }
        return gate
    }

    /// Makes the next `step` fail with `error` (only the folder sync and the rename can fail).
    package func fail(at step: Step, with error: SystemCallError) {
        instructions.withLock { $0[step, default: []].append(.fail(error)) }
    }

    /// Runs `action` the next time an engine reaches `step`, on that engine's thread.
    package func run(at step: Step, _ action: @escaping @Sendable () -> Void) {
        instructions.withLock { $0[step, default: []].append(.run(action)) }
    }

    /// Carries out the instruction for `step`, if any; returns the failure to throw.
    private func reach(_ step: Step) -> SystemCallError? {
        let next = instructions.withLock { instructions -> Instruction? in
            guard var list = instructions[step], !list.isEmpty else { return nil }
            defer { instructions[step] = list }
            return list.removeFirst()
        }
        switch next {
        case .pause(let gate)?: gate.arriveAndWait()
        case .fail(let error)?: return error
        case .run(let action)?: action()
        case nil: break
        }
        return nil
    }

    package func lock(_ path: String, timeout: @autoclosure () -> Duration, clock: EngineClock) throws -> FileLock {
        let lock = try base.lock(path, timeout: timeout(), clock: clock)
        if let error = reach(.afterLock) { throw error }
        return lock
    }

    package func read(_ path: String, through lock: FileLock?) throws(SystemCallError) -> FileContents? {
        let contents = try base.read(path, through: lock)
        if let error = reach(.afterRead) { throw error }
        return contents
    }

    package func commit(_ temporary: TemporaryFile, to path: String) throws(SystemCallError) {
        if let error = reach(.beforeRename) {
            base.discard(temporary)
            throw error
        }
        try base.commit(temporary, to: path)
        if let error = reach(.afterRename) { throw error }
    }

    package func syncFolder(of path: String) throws(SystemCallError) {
        if let error = reach(.beforeFolderSync) { throw error }
        try base.syncFolder(of: path)
    }
}

/// Where an engine stopped at a ``SteppingFileSystem/Step``: the test waits for it to arrive, then opens it.
package final class Gate: @unchecked Sendable {
    // Sendable: `arrived` and `isOpen` are only touched holding `condition`.
    package let step: SteppingFileSystem.Step
    private let condition = NSCondition()
    private var arrived = false
    private var isOpen = false

    init(step: SteppingFileSystem.Step) { self.step = step }

    /// Waits until an engine has reached the step; false after `timeout`, a hang guard.
    @discardableResult
    package func waitUntilReached(timeout: Duration = .seconds(20)) -> Bool {
        wait(timeout: timeout) { arrived }
    }

    /// Lets the engine stopped here go on (or the next one that arrives pass at once).
    package func open() {
        condition.lock()
        isOpen = true
        condition.broadcast()
        condition.unlock()
    }

    /// The engine's side: says it arrived, and waits until the test opens the gate (a minute at most: a hang guard
    /// for a test that failed before opening it).
    fileprivate func arriveAndWait() {
        condition.lock()
        arrived = true
        condition.broadcast()
        condition.unlock()
        _ = wait(timeout: .seconds(60)) { isOpen }
    }

    private func wait(timeout: Duration, until done: () -> Bool) -> Bool {
        let deadline = Date(timeIntervalSinceNow: Double(timeout.components.seconds))
        condition.lock()
        defer { condition.unlock() }
        while !done() {
            guard condition.wait(until: deadline) else { return done() }
        }
        return true
    }
}

/// `try replaceFile(at: url, with: data)` replaces the file at `url` as a store's commit does (a synced temporary
/// file renamed over it, the folder synced, the folder created if missing), for tests of the file layer and for
/// standing in for another Prefs process. Returns the identity of the file it put there.
@discardableResult
package func replaceFile(at url: URL, with data: Data, mode: mode_t = 0o600) throws -> FileIdentity {
    let fileSystem = POSIXFileSystem()
    let path = url.path(percentEncoded: false)
    let temporary = try fileSystem.writeTemporary(beside: path, data: data, mode: mode, durable: true)
    try fileSystem.commit(temporary, to: path)
    try fileSystem.syncFolder(of: path)
    return temporary.identity
}

extension StoreSpec {
    /// Opens the store a spec names with an engine of its own on `fileSystem` and `clock`: two stores opened so on
    /// one file exclude each other as two processes do.
    package static func open(_ spec: String, fileSystem: any FileSystem, clock: EngineClock) throws -> any KeyValueStore
    {
        let parts = spec.split(separator: ":", maxSplits: 2).map(String.init)
        switch parts.first {
        case "json" where parts.count == 2:
            return try FileStore(url: URL(filePath: parts[1]), fileSystem: fileSystem, clock: clock)
        case "plist" where parts.count == 3:
            return try SuiteFileStore(
                suiteName: parts[2], directory: URL(filePath: parts[1]), fileSystem: fileSystem, clock: clock)
        case "vault" where parts.count == 3:
            return try EncryptedFileStore(
                url: URL(filePath: parts[1]), key: .keyFile(URL(filePath: parts[2])), fileSystem: fileSystem,
                clock: clock)
        case "memory":
            return InMemoryStore()
        default:
            throw StoreSpec.SpecError(spec: spec)
        }
    }

}
