import Synchronization

@testable import Prefs

// What these tests read of the library's insides: nothing in the library uses them, so they live here.

extension DirectoryWatcher {
    /// Directories watched with inotify for live tokens (idle watches kept for reuse are not counted) plus files
    /// being polled.
    var activeWatchCount: Int {
        core.state.withLock { state in
            state.directories.count + state.registrations.values.count { $0.poller != nil }
        }
    }

    /// Directory watches kept for reuse after their last token went away.
    var idleWatchCount: Int { core.state.withLock { $0.idle.count } }

    /// Callbacks currently registered (live tokens).
    var callbackCount: Int { core.state.withLock { $0.registrations.count } }
}

extension StoredValueBox {
    /// The live `values` and `changes` streams of this declaration.
    var subscriberCount: Int { subscribers.withLock { $0.list.count } }
}

extension KDFParameters.Cost {
    /// A cheap but still valid Argon2id13 cost (8 MiB, one pass).
    static let testing = Self(opsLimit: 1, memLimit: 8 << 20)
}
