import CSodium
import Foundation

/// One-time libsodium set-up. Every entry point that calls into libsodium goes through ``ensureInitialized()``.
enum Sodium {
    /// `sodium_init()` returns 0 on first success, 1 when already initialized and -1 on failure. A `static let`
    /// initializer runs exactly once, lazily and thread-safely, so this is the whole synchronization story.
    private static let initStatus: Int32 = sodium_init()

    /// Initializes libsodium on first use; traps if the library cannot start (no usable randomness source).
    static func ensureInitialized() {
        precondition(initStatus >= 0, "libsodium failed to initialize (sodium_init returned \(initStatus))")
    }
}

/// Secret bytes in memory that is locked (never swapped out), excluded from core dumps where the platform allows,
/// and zeroed with `sodium_memzero` when the last reference goes away.
///
/// Keys and passphrases are ``Protection/guarded``: `sodium_malloc` memory, fenced by guard pages. A vault's
/// decrypted payload is ``Protection/locked``: page-aligned heap memory locked with `sodium_mlock`, without guard
/// pages, because setting up and tearing down guard pages takes five `mprotect`/`munmap` calls whose TLB
/// shoot-downs cost more than decrypting the whole vault (docs/BENCHMARKS.md).
///
/// Treat an instance as immutable once it has been shared: fill it through ``withUnsafeMutableBytes(_:)`` (or
/// ``random(count:)``) right after creation and only read it afterwards.
final class SecureBytes: @unchecked Sendable {
    // @unchecked Sendable: the pointer is owned exclusively by this object, never reallocated, and by contract the
    // contents are written only before the instance is shared with another thread; concurrent reads are safe.

    /// How the memory is protected beyond being locked, kept out of core dumps and zeroed on release.
    enum Protection {
        /// `sodium_malloc`: guard pages on either side, a canary, then `sodium_free`.
        case guarded
        /// Whole pages of heap memory, locked; no guard pages.
        case locked
    }

    /// The number of secret bytes.
    let count: Int
    private let pointer: UnsafeMutableRawPointer
    /// The bytes locked from `pointer` (whole pages) for ``Protection/locked`` memory; zero for guarded memory.
    private let lockedCount: Int
    /// Whether `mlock` succeeded, for ``Protection/locked`` memory (it needs a large enough `RLIMIT_MEMLOCK`).
    /// Always true for ``Protection/guarded`` memory, whose `sodium_malloc` locks as best it can and does not say.
    let isLocked: Bool

    /// Allocates `count` zeroed bytes of guarded memory. Traps when the allocation fails, like any Swift allocation.
    convenience init(count: Int) { self.init(count: count, protection: .guarded) }

    /// Allocates `count` zeroed bytes protected as `protection` says. Traps when the allocation fails.
    init(count: Int, protection: Protection) {
        precondition(count > 0, "SecureBytes needs a positive byte count")
        Sodium.ensureInitialized()
        switch protection {
        case .guarded:
            guard let pointer = sodium_malloc(count) else {
                fatalError("sodium_malloc(\(count)) failed: out of memory")
            }
            self.pointer = pointer
            lockedCount = 0
            isLocked = true
        case .locked:
            // Whole pages, so unlocking on release never unlocks a page another allocation locked.
            let page = Int(sysconf(Int32(_SC_PAGESIZE)))
            let rounded = (count + page - 1) / page * page
            var allocated: UnsafeMutableRawPointer?
            guard posix_memalign(&allocated, page, rounded) == 0, let pointer = allocated else {
                fatalError("posix_memalign(\(rounded)) failed: out of memory")
            }
            // Best effort, as in `sodium_malloc`: without a locked-memory allowance the bytes are still zeroed.
            isLocked = sodium_mlock(pointer, rounded) == 0
            self.pointer = pointer
            lockedCount = rounded
        }
        sodium_memzero(pointer, count)
        self.count = count
    }

    deinit {
        sodium_memzero(pointer, count)
        if lockedCount == 0 {
            sodium_free(pointer)
        } else {
            _ = sodium_munlock(pointer, lockedCount)  // zeroes the pages, then unlocks them
            free(pointer)
        }
    }

    /// A guarded copy of `bytes` (which must not be empty).
    convenience init(copying bytes: Data) {
        self.init(count: bytes.count)
        withUnsafeMutableBytes { destination in bytes.withUnsafeBytes { destination.copyMemory(from: $0) } }
    }

    /// A guarded copy of the UTF-8 bytes of `text` (which must not be empty).
    convenience init(copying text: String) {
        self.init(count: text.utf8.count)
        withUnsafeMutableBytes { destination in
            for (index, byte) in text.utf8.enumerated() { destination[index] = byte }
        }
    }

    /// `count` bytes from libsodium's CSPRNG.
    static func random(count: Int) -> SecureBytes {
        let bytes = SecureBytes(count: count)
        bytes.withUnsafeMutableBytes { randombytes_buf($0.baseAddress!, $0.count) }
        return bytes
    }

    /// Reads the secret bytes. The buffer must not escape the closure.
    func withUnsafeBytes<Result, Failure: Error>(
        _ body: (UnsafeRawBufferPointer) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        try body(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    /// Writes the secret bytes; only while the instance is not yet shared. The buffer must not escape the closure.
    func withUnsafeMutableBytes<Result, Failure: Error>(
        _ body: (UnsafeMutableRawBufferPointer) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        try body(UnsafeMutableRawBufferPointer(start: pointer, count: count))
    }
}

/// `count` bytes from libsodium's CSPRNG, for non-secret values such as nonces and salts.
func randomBytes(count: Int) -> [UInt8] {
    Sodium.ensureInitialized()
    var bytes = [UInt8](repeating: 0, count: count)
    bytes.withUnsafeMutableBytes { buffer in
        if let base = buffer.baseAddress { randombytes_buf(base, buffer.count) }
    }
    return bytes
}

/// Overwrites `buffer` with zeros in a way the optimizer cannot remove.
func secureZero(_ buffer: UnsafeMutableRawBufferPointer) {
    if let base = buffer.baseAddress, buffer.count > 0 { sodium_memzero(base, buffer.count) }
}
