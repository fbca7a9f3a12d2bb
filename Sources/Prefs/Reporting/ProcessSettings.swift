import Foundation
import Synchronization

/// What an app sets for the whole process through ``PrefsConfig`` and the layers below configuration read: the
/// error handler and the lock timeout, in one value under one lock.
package enum ProcessSettings {
    struct Values {
        /// Where reports go (``PrefsConfig/errorHandler``).
        var handler: @Sendable (PrefsReport) -> Void = ErrorReporter.logToStandardError
        /// Whether `handler` is still the default one, which prints: a test that captures reports then keeps them
        /// out of its output.
        var handlerIsDefault = true
        /// How long a writer waits for a store file's lock (``PrefsConfig/lockTimeout``).
        var lockTimeout: Duration = .seconds(5)
    }

    static let values = Mutex(Values())
}
