import Synchronization

// What the tests of this package read of a watcher; nothing in the library uses these.
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
