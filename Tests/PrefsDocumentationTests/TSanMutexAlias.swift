import PrefsTestSupport

#if PREFS_TSAN
    import Synchronization

    /// ThreadSanitizer builds give Prefs its own annotated `Mutex`, which `@testable import Prefs` makes visible
    /// here next to Synchronization's; this keeps the tests on Synchronization's.
    typealias Mutex<Value: ~Copyable> = Synchronization.Mutex<Value>
#endif
