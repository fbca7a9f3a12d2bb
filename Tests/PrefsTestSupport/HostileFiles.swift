public import Foundation

/// Small files that would cost far more than their size to a careless reader, for tests, the fuzz corpus and the
/// benchmarks.
public enum HostileFiles {
    /// A binary property list whose top dictionary is `{"a": A_levels}`, where each `A_i` is an array of 16
    /// references to `A_(i-1)` and `A_0` is the integer 0, padded with an unreferenced data object of `padding`
    /// bytes: valid, small, and 16^levels values when every reference is followed (issue 36).
    public static func sharedReferencePlist(levels: Int, padding: Int = 0) -> Data {
        func bigEndian(_ value: Int, _ size: Int) -> [UInt8] {
            (0..<size).reversed().map { UInt8(truncatingIfNeeded: value >> (8 * $0)) }
        }
        var objects: [[UInt8]] = [[0xD1, 1, UInt8(2 + levels)], [0x51, UInt8(ascii: "a")], [0x10, 0]]
        for level in 1...levels { objects.append([0xAF, 0x10, 16] + Array(repeating: UInt8(1 + level), count: 16)) }
        objects.append([0x4F, 0x12] + bigEndian(padding, 4) + Array(repeating: 0, count: padding))
        var file = Array("bplist00".utf8)
        var offsets: [Int] = []
        for object in objects {
            offsets.append(file.count)
            file += object
        }
        let table = file.count
        for offset in offsets { file += bigEndian(offset, 4) }
        file += [0, 0, 0, 0, 0, 0, 4, 1] + bigEndian(objects.count, 8) + bigEndian(0, 8) + bigEndian(table, 8)
        return Data(file)
    }

    /// `{"a": [[[…]]]}`: arrays nested `depth` deep.
    public static func deepArrayJSON(depth: Int) -> Data {
        Data(("{\"a\": " + String(repeating: "[", count: depth) + String(repeating: "]", count: depth) + "}").utf8)
    }

    /// Writes `shared.plist` (the shared-reference file, six levels) and `deep.json` (30 000 nested arrays) into
    /// `folder`: both under the 64 KiB the fuzzer's inputs may have.
    public static func write(into folder: URL) throws {
        try sharedReferencePlist(levels: 6).write(to: folder.appending(path: "shared.plist"))
        try deepArrayJSON(depth: 30_000).write(to: folder.appending(path: "deep.json"))
    }
}
