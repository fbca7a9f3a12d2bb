import Foundation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

/// `FileStore` writes `Data` as standard padded base64 (Foundation's, or the text its last write kept); it must match Foundation's byte for
/// byte at every length (each remainder of three, and each way a length can end the encoder's six-byte steps) and
/// read back exactly.
@Suite(.ownThreads)
struct JSONDataEncodingTests {
    @Test func dataIsWrittenAsFoundationsBase64AndReadsBack() throws {
        var state: UInt32 = 12_345
        for length in Array(0...20) + [255, 256, 257, 10_240, 10_241, 10_242] {
            let bytes = Data(
                (0..<length).map { _ in
                    state = state &* 1_103_515_245 &+ 12_345
                    return UInt8(truncatingIfNeeded: state >> 16)
                })
            let text = try JSONFormat.encodeValue(.data(bytes))
            #expect(text == "{\"$data\": \"\(bytes.base64EncodedString())\"}")
            let document = try JSONFormat.encode(["blob": .data(bytes)])
            #expect(try JSONFormat.decode(document, path: "test") == ["blob": .data(bytes)])
        }
    }

    @Test func aSliceOfLargerDataIsWrittenFromItsOwnBytes() throws {
        let whole = Data((0..<64).map { UInt8($0 * 7 & 0xFF) })
        for start in 0..<8 {
            let slice = whole[start..<(start + 41)]
            #expect(try JSONFormat.encodeValue(.data(slice)) == "{\"$data\": \"\(Data(slice).base64EncodedString())\"}")
        }
    }

    /// A store keeps the base64 texts of its large `Data` values between writes (`JSONFormat.Base64Memo`): what it
    /// writes must stay what a fresh encode writes when a value changes in place, repeats, nests, moves or goes, and
    /// it keeps only the large values of the last document.
    @Test func keptBase64TextsWriteWhatAFreshEncodeWrites() throws {
        let memo = JSONFormat.Base64Memo()
        func blob(_ seed: UInt8, _ count: Int = 10_000) -> Data {
            Data((0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31) ^ seed })
        }
        let documents: [(values: [String: PrefValue], kept: Int)] = [
            (["a": .data(blob(1)), "b": .data(blob(2)), "small": .data(blob(3, 100))], 2),
            (["a": .data(blob(1)), "b": .data(blob(4)), "small": .data(blob(5, 100))], 2),
            (["a": .data(blob(4)), "b": .data(blob(4)), "list": .array([.data(blob(1))])], 3),
            (["a": .data(blob(1))], 1),
            ([:], 0),
        ]
        for (values, kept) in documents {
            #expect(try JSONFormat.encode(values, base64: memo) == JSONFormat.encode(values))
            #expect(memo.count == kept)
        }
    }

    /// 600 values of 20 KB alike but for their last 8 bytes: swift-corelibs-foundation hashes only the first 80 bytes
    /// of a `Data`, so a memo keyed by the bytes put them all under one hash and each lookup compared a value with
    /// every other (20 writes of a small key took 25 s, against 1.45 s with random bytes). Every value the memo keeps
    /// has a key of its own hash, and the document is the same.
    @Test func valuesAlikeAtTheStartDoNotShareAKeyInTheMemo() throws {
        let memo = JSONFormat.Base64Memo()
        var values: [String: PrefValue] = ["count": .int(0)]
        for index in 0..<600 {
            var bytes = Data(repeating: 0x5A, count: 20_000)
            withUnsafeBytes(of: UInt64(index).bigEndian) { bytes.replaceSubrange(19_992..<20_000, with: $0) }
            values["blob-\(index)"] = .data(bytes)
        }
        let first = try JSONFormat.encode(values, base64: memo)
        values["count"] = .int(1)
        #expect(try JSONFormat.encode(values, base64: memo) == JSONFormat.encode(values))
        #expect(first.count > 600 * 26_000)
        #expect(memo.count == 600)
        #expect(Set(memo.keyHashes).count == 600)
    }

    /// The user's path: a `FileStore` holding a large value that is rewritten with other bytes of the same length,
    /// between writes of another key, has the new bytes in its file.
    @Test func aLargeValueRewrittenInAFileStoreIsInItsFileAsItIsNow() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let url = directory.file("blobs.json")
        let store = try FileStore(url: url)
        var bytes = Data((0..<20_000).map { UInt8(truncatingIfNeeded: $0) })
        for round in 0..<3 {
            bytes[round * 7_000] ^= 0xFF
            try store.setValue(.data(bytes), forKey: "blob")
            try store.setValue(.int(Int64(round)), forKey: "count")
            #expect(
                try JSONFormat.decode(Data(contentsOf: url), path: url.path) == [
                    "blob": .data(bytes), "count": .int(Int64(round)),
                ])
        }
    }

    /// The memo keeps at most its budget of text: the values beyond it are encoded again on every write, and the
    /// document is the same.
    @Test func theKeptTextsStayWithinTheMemosBudget() throws {
        let memo = JSONFormat.Base64Memo(budget: 30_000)
        let values = Dictionary(
            uniqueKeysWithValues: (0..<5).map { index in
                ("blob-\(index)", PrefValue.data(Data(repeating: UInt8(index), count: 10_000)))
            })
        for _ in 0..<2 {
            #expect(try JSONFormat.encode(values, base64: memo) == JSONFormat.encode(values))
            // Each text is 13 336 bytes: two fit in 30 000.
            #expect(memo.count == 2)
        }
    }
}
