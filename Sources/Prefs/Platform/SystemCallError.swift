import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A failed system call of the file layer: which file, what was being done, and the `errno` (with an optional
/// explanation that replaces the `strerror` text, for refusals that are not a system error, such as a FIFO where a
/// regular file belongs).
///
/// The file layer throws this neutral error; each store converts it at its boundary, to ``PrefsError/io`` for the
/// preference stores and to ``VaultError/io`` for vault key files.
package struct SystemCallError: Error, Sendable, Equatable {
    package var path: String
    package var operation: String
    package var errno: Int32
    /// Replaces the `strerror` text when set.
    package var detail: String?

    package init(path: String, operation: String, errno code: Int32 = POSIX.lastError, detail: String? = nil) {
        self.path = path
        self.operation = operation
        self.errno = code
        self.detail = detail
    }

    /// The explanation: `detail`, or the `strerror` text of `errno`.
    package var message: String { detail ?? POSIX.message(for: errno) }

    /// The same failure as a `PrefsError.io`.
    package var prefsError: PrefsError { .io(path: path, operation: operation, errno: errno, message: message) }
}

/// Runs file-layer code, turning its `SystemCallError` into a `PrefsError`.
func prefsIO<T>(_ body: () throws(SystemCallError) -> T) throws(PrefsError) -> T {
    do { return try body() } catch { throw error.prefsError }
}
