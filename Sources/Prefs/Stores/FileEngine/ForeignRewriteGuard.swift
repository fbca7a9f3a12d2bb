import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Keeps a UserDefaults suite's recent Prefs commits from being undone by Foundation's `synchronize()`.
///
/// Foundation re-reads the suite file, applies the keys its own process changed and rewrites the file in place,
/// without a lock. A Prefs commit that lands between its read and its write is overwritten with the value Foundation
/// read (or, when Foundation could not read the file, with nothing at all). Foundation never sets a key it did not
/// change itself, so a key that a foreign rewrite puts back to a value it had *before* a recent Prefs commit is
/// such a lost update, and is restored.
///
/// The guard remembers, for each key this process committed in the last ``window``, its current value and the
/// values it replaced. When the file holds one of those older values, and the file was last written by something
/// other than Prefs (Prefs always writes a binary property list; Foundation on Linux writes XML), the key's latest
/// value is due again. A value that matches neither (someone
/// set the key to something new), or an older value written by another Prefs process, is taken as it is, and the
/// key's history is dropped.
///
/// Limits, as documented in RELIABILITY.md: a key that Foundation code itself sets back to one of its values of the
/// last few seconds is taken for a stale rewrite and restored to Prefs' value; Foundation's XML rewrite also keeps
/// only whole-second dates and turns `Float`s into `Double`s, which is taken as a new value.
final class ForeignRewriteGuard: Sendable {
    /// How long a commit is remembered: far longer than Foundation takes between its read and its write (its read
    /// retries for up to 450 ms on a file it cannot parse, and a write it cannot verify is retried after 50 ms).
    static let window: Duration = .seconds(5)
    /// The most older values remembered per key; the oldest go first.
    static let historyLimit = 512

    /// A key's recent commits.
    private struct History {
        /// What this process committed last (nil: removed).
        var latest: PrefValue?
        /// The values it had before, in the window (nil: absent).
        var earlier: [PrefValue?]
        /// When `latest` was committed, on the engine's clock.
        var committed: Duration
    }

    private struct State {
        var keys: [String: History] = [:]

        mutating func prune(now: Duration) {
            keys = keys.filter { now - $0.value.committed < ForeignRewriteGuard.window }
        }
    }

    private let state = Mutex(State())
    let path: String

    init(path: String) { self.path = path }

    /// What a write's check just before its rename throws when the file was rewritten in place since it was read.
    struct BaseChanged: Error {}

    /// Whether any commit is remembered (nothing to check otherwise).
    var isIdle: Bool {
        state.withLock { state in
            state.prune(now: EngineClock.current.now())
            return state.keys.isEmpty
        }
    }

    /// Records a commit that replaced `old` with `new`; `key`, when given, is the only key that changed.
    func recordCommit(
        from old: [String: PrefValue], to new: [String: PrefValue], changing key: String?
    ) {
        let changed: [String] =
            if let key { [key] } else { Array(StoreState.diff(old, new)) }
        let now = EngineClock.current.now()
        state.withLock { state in
            state.prune(now: now)
            for key in changed {
                let before = old[key]
                let after = new[key]
                guard before != after else { continue }
                var history = state.keys[key] ?? History(latest: after, earlier: [], committed: now)
                if !history.earlier.contains(before) { history.earlier.append(before) }
                history.earlier.removeAll { $0 == after }
                if history.earlier.count > Self.historyLimit { history.earlier.removeFirst() }
                history.latest = after
                history.committed = now
                state.keys[key] = history
            }
        }
    }

    /// The keys a foreign rewrite put back to older values, with the values to restore (nil: remove again), given
    /// the values just read from the file (nil identity: it is gone). Forgets keys that someone changed on purpose.
    ///
    /// A file that is gone was removed on purpose (Foundation rewrites a suite, it never removes it): nothing is
    /// restored, so deleting a live store's folder is not undone by the store.
    ///
    /// Keys in `deferred` have a newer value in memory, which the next commit writes: they are left alone.
    func restorations(
        in values: [String: PrefValue], identity: FileIdentity?, deferred: Set<String> = []
    ) -> [String: PrefValue?] {
        state.withLock { state in
            state.prune(now: EngineClock.current.now())
            guard !state.keys.isEmpty else { return [:] }
            guard identity != nil else {
                state.keys.removeAll()
                return [:]
            }
            let differing = state.keys.filter { !deferred.contains($0.key) && values[$0.key] != $0.value.latest }
            guard !differing.isEmpty else { return [:] }
            let foreign = !startsWithBinaryMagic()
            var restore: [String: PrefValue?] = [:]
            for (key, history) in differing {
                if foreign, history.earlier.contains(values[key]) {
                    restore[key] = history.latest
                } else {
                    // Changed on purpose (a new value, or another Prefs writer): theirs now.
                    state.keys[key] = nil
                }
            }
            return restore
        }
    }

    /// Whether `value` is one that this process's recent commits of `key` replaced: a foreign rewrite that puts it
    /// back wrote a stale copy, which a deferred change of the key does not give way to.
    func replaced(_ value: PrefValue?, forKey key: String) -> Bool {
        state.withLock { state in
            state.prune(now: EngineClock.current.now())
            return state.keys[key]?.earlier.contains(value) ?? false
        }
    }

    /// Whether the file starts as a binary property list, the only form Prefs writes (an in-place rewrite of that
    /// form by another tool is not told apart from a Prefs write).
    private func startsWithBinaryMagic() -> Bool {
        let fd = POSIX.retrying { open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY) }
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var head = [UInt8](repeating: 0, count: 8)
        let count = head.withUnsafeMutableBytes { read(fd, $0.baseAddress, 8) }
        return count == 8 && BinaryPropertyList.startsWithMagic(head)
    }
}
