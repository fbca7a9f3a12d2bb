import CSodium
import Foundation

/// `let key = SecureBytes(count: 32)` holds secret bytes (a key, a passphrase) in `sodium_malloc` memory: locked so
/// it is never swapped out, kept out of core dumps where the platform allows, fenced by guard pages, and zeroed when
/// the last reference goes away.
///
/// A ``VaultKeySource`` hands a vault's key to Prefs in one: fill it through ``withUnsafeMutableBytes(_:)`` straight
/// from where the key is kept (or make a new key with ``random(count:)``), so the key never passes through an
/// ordinary Swift array. Treat an instance as immutable once it has been shared: fill it right after creation and
/// only read it afterwards.
public final class SecureBytes: @unchecked Sendable {
    // @unchecked Sendable: the pointer is owned exclusively by this object, never reallocated, and by contract the
    // contents are written only before the instance is shared with another thread; concurrent reads are safe.

    /// `bytes.count` is the number of secret bytes.
    public let count: Int
    private let pointer: UnsafeMutableRawPointer

    /// `SecureBytes(count: 32)` allocates `count` zeroed bytes (`count` must be positive). Traps when the allocation
    /// fails, like any Swift allocation.
    public init(count: Int) {
        precondition(count > 0, "SecureBytes needs a positive byte count")
        Sodium.ensureInitialized()
        guard let pointer = sodium_malloc(count) else { fatalError("sodium_malloc(\(count)) failed: out of memory") }
        sodium_memzero(pointer, count)
        self.pointer = pointer
        self.count = count
    }

    deinit { sodium_free(pointer) }  // zeroes the bytes before it frees them

    /// A copy of `bytes` (which must not be empty).
    convenience init(copying bytes: Data) {
        self.init(count: bytes.count)
        withUnsafeMutableBytes { destination in bytes.withUnsafeBytes { destination.copyMemory(from: $0) } }
    }

    /// A copy of the UTF-8 bytes of `text` (which must not be empty).
    convenience init(copying text: String) {
        self.init(count: text.utf8.count)
        withUnsafeMutableBytes { destination in
            for (index, byte) in text.utf8.enumerated() { destination[index] = byte }
        }
    }

    /// `SecureBytes.random(count: 32)` is `count` bytes from libsodium's CSPRNG: a new key.
    public static func random(count: Int) -> SecureBytes {
        let bytes = SecureBytes(count: count)
        bytes.withUnsafeMutableBytes { randombytes_buf($0.baseAddress!, $0.count) }
        return bytes
    }

    /// `key.withUnsafeBytes { buffer in … }` reads the secret bytes. The buffer must not escape the closure.
    public func withUnsafeBytes<Result, Failure: Error>(
        _ body: (UnsafeRawBufferPointer) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        try body(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    /// `key.withUnsafeMutableBytes { buffer in … }` writes the secret bytes; only while the instance is not yet
    /// shared. The buffer must not escape the closure.
    public func withUnsafeMutableBytes<Result, Failure: Error>(
        _ body: (UnsafeMutableRawBufferPointer) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        try body(UnsafeMutableRawBufferPointer(start: pointer, count: count))
    }
}
