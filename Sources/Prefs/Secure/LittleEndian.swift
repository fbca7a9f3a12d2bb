import Foundation

/// Sequential little-endian reads from a byte buffer, each checked against the end of the input: how the vault header
/// and the payload of a format 2 vault are read.
struct LittleEndianReader {
    let bytes: UnsafeRawBufferPointer
    private(set) var position = 0

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    /// The bytes not read yet.
    var remaining: Int { bytes.count - position }

    mutating func byte() throws(BinaryFormatFailure) -> UInt8 {
        guard position < bytes.count else { throw BinaryFormatFailure("truncated at offset \(position)") }
        defer { position += 1 }
        return bytes[position]
    }

    mutating func integer<T: FixedWidthInteger>(_: T.Type) throws(BinaryFormatFailure) -> T {
        let size = MemoryLayout<T>.size
        guard remaining >= size else { throw BinaryFormatFailure("truncated at offset \(position)") }
        defer { position += size }
        return T(littleEndian: bytes.loadUnaligned(fromByteOffset: position, as: T.self))
    }

    /// The next `count` bytes, without copying; valid as long as `bytes` is.
    mutating func slice(_ count: Int) throws(BinaryFormatFailure) -> UnsafeRawBufferPointer {
        guard count >= 0, remaining >= count else { throw BinaryFormatFailure("truncated at offset \(position)") }
        defer { position += count }
        return UnsafeRawBufferPointer(rebasing: bytes[position..<(position + count)])
    }

    mutating func skip(_ count: Int) throws(BinaryFormatFailure) { _ = try slice(count) }
}

extension Array where Element == UInt8 {
    /// Appends `value` in little-endian byte order.
    mutating func appendLittleEndian<T: FixedWidthInteger>(_ value: T) {
        var little = value.littleEndian
        Swift.withUnsafeBytes(of: &little) { append(contentsOf: $0) }
    }
}
