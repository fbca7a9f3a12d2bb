import Foundation

/// A file store's deferred writes (see ``KeyValueStore/deferringWrites(window:)``): a view of the same engine whose
/// plain writes are committed within a window, and the flushes that commit them at once.
extension FileBackedStore {
    package func ownDeferringWrites(window: Duration) -> any KeyValueStore {
        // A store made from a closed one is closed too.
        FileBackedStore(
            url: url, engine: engine, retained: engine.retain(), window: window, domainName: domainName,
            schemaDomain: schemaDomain)
    }

    package func ownFlush() throws {
        try open().commitDeferred()
    }

    package func ownFlushInBackground() async throws {
        let engine = try open()
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            engine.backgroundQueue.async {
                continuation.resume(with: Result { try engine.commitDeferred() })
            }
        }
    }
}
