import CSodium
import Foundation
import Synchronization

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
/// shoot-downs cost more than decrypting the whole vault (docs/BENCHMARKS.md). For the same reason released memory
/// is wiped and then kept locked by ``SecureMemoryPool`` for the next allocation of its shape.
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
            if let reused = SecureMemoryPool.takeGuarded(count: count) {
                self.pointer = reused
            } else if let pointer = sodium_malloc(count) {
                self.pointer = pointer
            } else {
                fatalError("sodium_malloc(\(count)) failed: out of memory")
            }
            lockedCount = 0
            isLocked = true
        case .locked:
            // Whole pages, so unlocking on release never unlocks a page another allocation locked.
            let page = SecureMemoryPool.pageSize
            let rounded = (count + page - 1) / page * page
            if let region = SecureMemoryPool.takeLocked(minimum: rounded) {
                pointer = region.pointer
                lockedCount = region.capacity
                isLocked = region.isLocked
            } else {
                var allocated: UnsafeMutableRawPointer?
                guard posix_memalign(&allocated, page, rounded) == 0, let pointer = allocated
                else { fatalError("posix_memalign(\(rounded)) failed: out of memory") }
                // Best effort, as in `sodium_malloc`: without a locked-memory allowance the bytes are still zeroed.
                isLocked = sodium_mlock(pointer, rounded) == 0
                // Every page zeroed, not only `count` bytes: heap memory may hold anything, and kept pages must be
                // all zeros whatever size they serve next.
                sodium_memzero(pointer, rounded)
                self.pointer = pointer
                lockedCount = rounded
            }
        }
        sodium_memzero(pointer, count)
        self.count = count
    }

    deinit {
        // Wiped first, whatever happens to the memory next: nothing secret is ever kept for reuse.
        sodium_memzero(pointer, count)
        if lockedCount == 0 {
            if let evicted = SecureMemoryPool.keepGuarded(pointer, count: count) { sodium_free(evicted) }
        } else {
            let region = SecureMemoryPool.Region(pointer: pointer, capacity: lockedCount, isLocked: isLocked)
            for evicted in SecureMemoryPool.keepLocked(region) { evicted.release() }
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

/// Wiped secure memory kept for the next ``SecureBytes`` of the same shape, so that opening a vault does not pay for
/// setting up and tearing down locked pages and guard pages every time (about a third of an open, measured in
/// docs/BENCHMARKS.md).
///
/// Memory enters only after ``SecureBytes`` has zeroed every byte it used, and stays locked (and, for guarded
/// memory, fenced by its guard pages) while it waits. Guarded allocations are reused for the same byte count only, so
/// the canary and the trailing guard page stay exactly where `sodium_malloc` put them. At most
/// ``guardedLimit`` guarded allocations and ``lockedLimit`` bytes of locked pages are kept; the oldest are released
/// to make room for newer ones.
enum SecureMemoryPool {
    /// Whole locked pages waiting for reuse. The address is kept as an integer: the memory belongs to the pool until
    /// it is handed out again.
    struct Region {
        let address: UInt
        /// The bytes allocated and locked (whole pages).
        let capacity: Int
        /// Whether `mlock` succeeded when the pages were allocated.
        let isLocked: Bool

        init(pointer: UnsafeMutableRawPointer, capacity: Int, isLocked: Bool) {
            address = UInt(bitPattern: pointer)
            self.capacity = capacity
            self.isLocked = isLocked
        }

        var pointer: UnsafeMutableRawPointer { UnsafeMutableRawPointer(bitPattern: address)! }

        /// Unlocks (which zeroes the pages again) and frees the memory.
        func release() {
            _ = sodium_munlock(pointer, capacity)
            free(pointer)
        }
    }

    static let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))
    /// Guarded allocations kept at most, across all sizes.
    static let guardedLimit = 16
    /// Guarded allocations of more than this many bytes are never kept (keys are 32 bytes; passphrases are short).
    static let guardedSizeLimit = 1_024
    /// Locked bytes kept at most: 1 MiB, or a quarter of this process's `RLIMIT_MEMLOCK` when that is smaller, so the
    /// memory waiting here leaves most of the allowance to the secrets in use.
    static let lockedLimit: Int = {
        var limit = rlimit()
        #if canImport(Glibc)
            let resource = __rlimit_resource_t(__RLIMIT_MEMLOCK.rawValue)  // glibc's own type for the resource
        #else
            let resource = RLIMIT_MEMLOCK
        #endif
        guard getrlimit(resource, &limit) == 0, limit.rlim_cur != rlim_t.max
        else {
            return 1 << 20
        }
        return min(1 << 20, Int(clamping: limit.rlim_cur / 4))
    }()

    // Addresses are kept as integers, as in `Region`.
    private struct Shelves {
        var guarded: [(address: UInt, count: Int)] = []
        var locked: [Region] = []
        var lockedBytes = 0
    }

    private static let shelves = Mutex(Shelves())

    /// A kept guarded allocation of exactly `count` bytes (zeroed), if there is one.
    static func takeGuarded(count: Int) -> UnsafeMutableRawPointer? {
        guard count <= guardedSizeLimit else { return nil }
        let address = shelves.withLock { shelves -> UInt? in
            guard let index = shelves.guarded.lastIndex(where: { $0.count == count }) else { return nil }
            return shelves.guarded.remove(at: index).address
        }
        return address.flatMap { UnsafeMutableRawPointer(bitPattern: $0) }
    }

    /// Keeps `pointer`, a `sodium_malloc` allocation of `count` bytes that the caller has zeroed, and returns what the
    /// caller must `sodium_free` instead: `pointer` itself when it is too large to keep, or the oldest allocation kept
    /// when the pool is full.
    static func keepGuarded(_ pointer: UnsafeMutableRawPointer, count: Int) -> UnsafeMutableRawPointer? {
        guard count <= guardedSizeLimit else { return pointer }
        let evicted = shelves.withLock { shelves -> UInt? in
            shelves.guarded.append((UInt(bitPattern: pointer), count))
            return shelves.guarded.count > guardedLimit ? shelves.guarded.removeFirst().address : nil
        }
        return evicted.flatMap { UnsafeMutableRawPointer(bitPattern: $0) }
    }

    /// Kept locked pages of at least `minimum` bytes and at most twice that, if there are any.
    static func takeLocked(minimum: Int) -> Region? {
        shelves.withLock { shelves -> Region? in
            guard
                let index = shelves.locked.lastIndex(where: {
                    $0.capacity >= minimum && $0.capacity <= 2 * minimum
                })
            else { return nil }
            let region = shelves.locked.remove(at: index)
            shelves.lockedBytes -= region.capacity
            return region
        }
    }

    /// Keeps `region`, whose used bytes the caller has zeroed, and returns what the caller must release instead: the
    /// region itself when it is too large to keep, or older regions that no longer fit.
    static func keepLocked(_ region: Region) -> [Region] {
        guard region.capacity <= lockedLimit else { return [region] }
        return shelves.withLock { shelves -> [Region] in
            shelves.locked.append(region)
            shelves.lockedBytes += region.capacity
            var evicted: [Region] = []
            while shelves.lockedBytes > lockedLimit {
                let oldest = shelves.locked.removeFirst()
                shelves.lockedBytes -= oldest.capacity
                evicted.append(oldest)
            }
            return evicted
        }
    }

    /// Whether every byte of every kept allocation is zero (for tests: nothing secret waits here).
    static func keptMemoryIsZero() -> Bool {
        shelves.withLock { shelves in
            let guarded = shelves.guarded.allSatisfy { kept in
                UnsafeRawBufferPointer(start: UnsafeRawPointer(bitPattern: kept.address), count: kept.count)
                    .allSatisfy { $0 == 0 }
            }
            let locked = shelves.locked.allSatisfy { kept in
                UnsafeRawBufferPointer(start: UnsafeRawPointer(bitPattern: kept.address), count: kept.capacity)
                    .allSatisfy { $0 == 0 }
            }
            return guarded && locked
        }
    }

    /// How many guarded allocations and locked bytes are waiting (for tests).
    static var kept: (guarded: Int, lockedBytes: Int) {
        shelves.withLock { ($0.guarded.count, $0.lockedBytes) }
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
