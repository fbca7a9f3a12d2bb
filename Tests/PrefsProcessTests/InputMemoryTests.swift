import Foundation
import PrefsTestSupport
import TestThreads
import Testing

/// What opening a file costs in memory, measured as the peak resident size of a child that opens the store, reads
/// every value and writes one, against a child that does the same with a tiny file in the same run.
@Suite(.ownThreads) struct InputMemoryTests {
    /// The child's first line and its peak resident size in KiB.
    private static func open(_ spec: String) throws -> (outcome: String, peakKiB: Int) {
        let result = try runChild(["try-open", spec], within: 60)
        #expect(result.status == 0, "\(result.error)")
        let peak = result.lines.last.flatMap { Int($0.split(separator: " ").last ?? "") } ?? .max
        return (result.lines.first ?? "", peak)
    }

    /// The 8 MB shared-reference file of issue 36 expands to 17 million values; it used to cost 513 MB (64 times
    /// its size) to open as a suite. It is refused now, as a graph that expands beyond what its size allows, at
    /// little more than its size.
    @Test func aSmallPlistOfSharedReferencesCostsItsSize() throws {
        let folder = try TempDir()
        defer { folder.cleanup() }
        let data = HostileFiles.sharedReferencePlist(levels: 6, padding: 8 << 20)
        try data.write(to: folder.file("shared.plist"))
        try Data("<plist><dict/></plist>".utf8).write(to: folder.file("tiny.plist"))
        let baseline = try Self.open("plist:\(folder.path):tiny")
        #expect(baseline.outcome == "ok")
        let opened = try Self.open("plist:\(folder.path):shared")
        #expect(opened.outcome.contains("expands to more than"), "\(opened.outcome)")
        #expect(opened.peakKiB - baseline.peakKiB < 8 * data.count >> 10, "peak \(opened.peakKiB) KiB")
    }

    /// An 8 MB FileStore file holding one array of 2.8 million zeros used to cost 40 times its size to open. Each
    /// element now costs one `PrefValue` (24 bytes for 3 bytes of text), the array is sized before it is filled,
    /// and the text is parsed where it lies: opening, reading and rewriting it stays within 12 times its size.
    @Test func aLargeJSONArrayCostsLittleMoreThanItsValues() throws {
        let folder = try TempDir()
        defer { folder.cleanup() }
        let count = (8 << 20) / 3
        let text = "{\"a\": [" + Array(repeating: "0", count: count).joined(separator: ", ") + "]}"
        try Data(text.utf8).write(to: folder.file("zeros.json"))
        try Data("{}".utf8).write(to: folder.file("tiny.json"))
        let baseline = try Self.open("json:\(folder.path("tiny.json"))")
        let opened = try Self.open("json:\(folder.path("zeros.json"))")
        #expect(baseline.outcome == "ok")
        #expect(opened.outcome == "ok")
        #expect(opened.peakKiB - baseline.peakKiB < 12 * text.utf8.count >> 10, "peak \(opened.peakKiB) KiB")
    }

    /// An 8 MB XML suite file as Foundation writes it cost 9.7 times its size beyond an empty one's to open through
    /// Foundation's parser (its tree, then a bridged copy, then the values). Read straight from its bytes, opening,
    /// reading and rewriting it stays within the 8 times every input format is held to.
    @Test func anXMLPropertyListCostsLessThanEightTimesItsSize() throws {
        let folder = try TempDir()
        defer { folder.cleanup() }
        var values: [String: Any] = [:]
        for index in 0..<110_000 {
            let key = "key-" + String(index)
            switch index % 5 {
            case 0: values[key] = index
            case 1: values[key] = "value number \(index)"
            case 2: values[key] = Double(index) + 0.25
            case 3: values[key] = (0..<4).map { "item \($0)" }
            default: values[key] = Date(timeIntervalSinceReferenceDate: Double(index))
            }
        }
        let data = try PropertyListSerialization.data(fromPropertyList: values, format: .xml, options: 0)
        try data.write(to: folder.file("big.plist"))
        try Data("<plist><dict/></plist>".utf8).write(to: folder.file("tiny.plist"))
        let baseline = try Self.open("plist:\(folder.path):tiny")
        let opened = try Self.open("plist:\(folder.path):big")
        #expect(baseline.outcome == "ok")
        #expect(opened.outcome == "ok")
        #expect(
            opened.peakKiB - baseline.peakKiB < 8 * data.count >> 10,
            "peak \(opened.peakKiB) KiB, file \(data.count >> 10) KiB")
    }
}
