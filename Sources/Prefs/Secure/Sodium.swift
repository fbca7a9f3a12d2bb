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
