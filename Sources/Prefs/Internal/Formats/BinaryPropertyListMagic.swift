/// The binary property-list format (`bplist00`).
enum BinaryPropertyList {
    /// Whether `bytes` starts as a binary property list.
    static func startsWithMagic(_ bytes: some Collection<UInt8>) -> Bool {
        bytes.starts(with: BinaryPropertyListValidator.magic)
    }
}
