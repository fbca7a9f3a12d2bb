import Foundation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

/// `FileStore` writes `Data` as standard padded base64 (Foundation's); it must match Foundation's byte for byte at every length (each remainder of three, and each way a length can end the encoder's six-byte steps) and
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
}
