#if PREFS_TSAN
    import Synchronization

    @_silgen_name("__tsan_acquire")
    private func tsanAcquire(_ address: UnsafeRawPointer)

    @_silgen_name("__tsan_release")
    private func tsanRelease(_ address: UnsafeRawPointer)

    /// Only in ThreadSanitizer builds (`make tsan` compiles with `-D PREFS_TSAN`): shadows
    /// `Synchronization.Mutex` inside Prefs with the same lock plus the annotations ThreadSanitizer needs.
    ///
    /// On Linux `Synchronization.Mutex` locks with raw futex calls that ThreadSanitizer does not intercept, so it
    /// reports every pair of `withLock` bodies on different threads as a race. Telling it that each body acquires
    /// and releases the lock's own marker lets it check everything else.
    @usableFromInline
    struct Mutex<Value: ~Copyable>: ~Copyable, @unchecked Sendable {
        private let base: Synchronization.Mutex<Value>
        private let marker = UnsafeMutableRawPointer.allocate(byteCount: 1, alignment: 1)

        @usableFromInline
        init(_ initialValue: consuming sending Value) {
            base = Synchronization.Mutex(initialValue)
        }

        deinit { marker.deallocate() }

        @usableFromInline
        borrowing func withLock<Result: ~Copyable, Failure: Error>(
            _ body: (inout sending Value) throws(Failure) -> sending Result
        ) throws(Failure) -> sending Result {
            try base.withLock { (value: inout sending Value) throws(Failure) -> sending Result in
                tsanAcquire(marker)
                defer { tsanRelease(marker) }
                return try body(&value)
            }
        }
    }
#endif
