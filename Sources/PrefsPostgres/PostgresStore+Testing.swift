// What the tests look at inside a store; package-visible, not part of the public API.

import Synchronization

extension PostgresStore {
    /// `store.reconnectionCount`: the number of times the listener reconnected.
    package var reconnectionCount: Int { server.reconnections.load(ordering: .relaxed) }

    /// `store.openConnections`: the server connections this process holds for this store's connection string.
    package var openConnections: Int { server.openConnections }

    /// `store.listenerFailure`: why the listener cannot connect or read the change feed (nil while it can).
    package var listenerFailure: PostgresStoreError? { server.failure }

    /// `store.feedRowsRead`: the rows of keys the reads of the change feed of this store's connection have brought.
    package var feedRowsRead: Int { server.feedRows.load(ordering: .relaxed) }

    /// `store.feedReadCount`: the reads of the change feed of this store's connection started so far (each store's
    /// rows are merged, and `feedRowsRead` counts them, before the next read starts).
    package var feedReadCount: Int { server.feedReads.load(ordering: .relaxed) }

    /// `store.feedFailureCount`: the reads of the change feed of this store's connection that failed so far.
    package var feedFailureCount: Int { server.feedFailures.load(ordering: .relaxed) }

    /// `store.settlingFailureCount`: how many attempts to find out whether an unanswered write committed have failed.
    package var settlingFailureCount: Int { settlingFailures.load(ordering: .acquiring) }

    /// `store.wakeListener()` wakes the listener thread as a writer handing back a connection does.
    package func wakeListener() { server.wake() }

    /// `store.listenerActivity`: what the listener thread does now (`waiting`, `connecting`, …), for a failing
    /// test's message.
    package var listenerActivity: String {
        Server.Activity(rawValue: server.listenerActivity.load(ordering: .relaxed)).map { "\($0)" } ?? "?"
    }

    /// `store.changesArePolled`: whether the store reads the change feed on a timer (it does not hear notifications,
    /// or was told to poll) rather than when notified.
    package var changesArePolled: Bool { server.polls }
}
