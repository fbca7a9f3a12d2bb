import CSodium
import Foundation

/// Secret bytes (a key, a passphrase) in `sodium_malloc` memory: locked so it is never swapped out, kept out of
/// core dumps where the platform allows, fenced by guard pages, and zeroed when the last reference goes away.
///
/// Treat an instance as immutable once it has been shared: fill it through ``withUnsafeMutableBytes(_:)`` (or
/// ``random(count:)``) right after creation and only read it afterwards.
final class SecureBytes: @unchecked Sendable {
    // @unchecked Sendable: the pointer is owned exclusively by this object, never reallocated, and by contract the
    // contents are written only before the instance is shared with another thread; concurrent reads are safe.

    /// The number of secret bytes.
    let count: Int
    private let pointer: UnsafeMutableRawPointer

    /// Allocates `count` zeroed bytes. Traps when the allocation fails, like any Swift allocation.
    init(count: Int) {
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
