// `open_memory_*`: what opening a file of 1, 8 or 60 MB costs in memory, by format, as peak resident size over the
// file's size. Each figure is a fresh process (this executable with `--input-memory-child`), so one measurement's
// peak cannot hide another's.
import Foundation
import Prefs
import PrefsTestSupport

/// The formats measured: a FileStore's JSON, a suite's binary property list (as Prefs writes it), an XML property
/// list (as Foundation writes it), and a binary property list of shared references (issue 36: arrays of 16
/// references to the previous array, padded to the size), which is refused.
let inputMemoryKinds = ["json", "binary_plist", "xml_plist", "shared_plist"]

/// The most memory opening a file may cost beyond what opening an empty one costs, in multiples of its size.
let inputMemoryTarget = 8.0

/// Values of every kind a suite holds, under `count` keys of one length (so a file's size grows in step with the
/// count): numbers, text, dates, a short array.
private func mixedValues(_ count: Int) -> [String: PrefValue] {
    var values: [String: PrefValue] = [:]
    values.reserveCapacity(count)
    for index in 0..<count {
        let value: PrefValue =
            switch index % 6 {
            case 0: .int(Int64(index))
            case 1: .string("value number \(index)")
            case 2: .double(Double(index) + 0.25)
            case 3: .bool(index % 4 == 1)
            case 4: .array((0..<8).map { .int(Int64($0)) })
            default: .date(Date(timeIntervalSinceReferenceDate: Double(index)))
            }
        let digits = String(index)
        values["key-" + String(repeating: "0", count: max(0, 8 - digits.count)) + digits] = value
    }
    return values
}

/// Writes a file of `kind` of about `bytes` bytes into `folder` and returns the store spec the child opens (a JSON
/// file opens as a FileStore, the others as suites) and the file's size.
private func writeInput(kind: String, bytes: Int, folder: URL) throws -> (spec: String, size: Int) {
    let suite = "input-\(kind)-\(bytes)"
    let file = folder.appending(path: kind == "json" ? "\(suite).json" : "\(suite).plist")
    func written(_ data: Data) throws -> Data {
        try data.write(to: file)
        return data
    }
    // Sized from samples: bytes per key in this format, then again at up to 100 000 keys, where references and
    // offsets have the width they keep in the largest files.
    func keyCount(_ encode: ([String: PrefValue]) throws -> Data) rethrows -> Int {
        var count = 1_000
        for _ in 0..<2 {
            let sample = min(count, 100_000)
            count = max(1, bytes * 49 / 50 * sample / (try encode(mixedValues(sample)).count))
        }
        return count
    }
    let data: Data
    switch kind {
    case "json":
        func encode(_ values: [String: PrefValue]) throws -> Data {
            try FileStore(url: file).replaceAll(values)
            return try Data(contentsOf: file)
        }
        data = try encode(mixedValues(try keyCount(encode)))
    case "binary_plist":
        func encode(_ values: [String: PrefValue]) throws -> Data {
            try SuiteFileStore(suiteName: suite, directory: folder).replaceAll(values)
            return try Data(contentsOf: file)
        }
        data = try encode(mixedValues(try keyCount(encode)))
    case "xml_plist":
        func encode(_ values: [String: PrefValue]) throws -> Data {
            let objects = values.mapValues { value -> Any in
                switch value {
                case .array(let elements): elements.map { $0.description }
                case .int(let number): number
                case .double(let number): number
                case .bool(let flag): flag
                case .date(let date): date
                default: value.description
                }
            }
            return try PropertyListSerialization.data(fromPropertyList: objects, format: .xml, options: 0)
        }
        data = try written(try encode(mixedValues(try keyCount(encode))))
    default:
        data = try written(sharedReferencePlist(bytes: bytes))
    }
    let spec =
        kind == "json"
        ? "json:\(file.path(percentEncoded: false))" : "plist:\(folder.path(percentEncoded: false)):\(suite)"
    return (spec, data.count)
}

/// The shared-reference file padded to `bytes`, with as many levels as a file of that size was once allowed to
/// expand to (16 values per byte).
private func sharedReferencePlist(bytes: Int) -> Data {
    var levels = 1
    while 1 << (4 * (levels + 1)) <= 16 * bytes { levels += 1 }
    return HostileFiles.sharedReferencePlist(levels: levels, padding: bytes)
}

/// Runs one child on `spec` and returns its peak resident size in bytes, the seconds it took, and its outcome.
private func inputMemoryChild(_ spec: String) throws -> (peak: Int, seconds: Double, outcome: String) {
    let child = Process()
    child.executableURL = URL(filePath: try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
    child.arguments = ["--input-memory-child", spec]
    let output = Pipe()
    child.standardOutput = output
    try child.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    child.waitUntilExit()
    let fields = String(decoding: data, as: UTF8.self).split(separator: " ", maxSplits: 2).map(String.init)
    guard child.terminationStatus == 0, fields.count == 3, let kib = Int(fields[0]), let ns = Double(fields[1])
    else { throw BenchError.failed("the input-memory child failed on \(spec)") }
    return (kib << 10, ns / 1e9, fields[2].trimmingCharacters(in: .whitespacesAndNewlines))
}

/// The child: opens the store `spec` names (`json:PATH` or `plist:FOLDER:SUITE`), reads every value, and prints its
/// peak resident size in KiB (VmHWM: this process image's own), the nanoseconds the open took, and `ok` or the
/// error.
func runInputMemoryChild(spec: String) throws {
    let parts = spec.split(separator: ":", maxSplits: 2).map(String.init)
    let start = monotonicNanoseconds()
    var outcome = "ok"
    do {
        let store: any KeyValueStore =
            parts[0] == "json"
            ? try FileStore(url: URL(filePath: parts[1]))
            : try SuiteFileStore(suiteName: parts[2], directory: URL(filePath: parts[1]))
        _ = try store.allValues()
    } catch {
        outcome = "refused: \(error)".replacingOccurrences(of: "\n", with: " ")
    }
    let elapsed = monotonicNanoseconds() - start
    let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
    let peak = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") }
    print("\(peak?.split(separator: " ").dropFirst().first ?? "0") \(elapsed) \(outcome)")
}

/// One figure per format and size: peak over the file's size, and beyond what an empty file costs.
func inputMemoryFigures(folders: Folders, quick: Bool, includes: (String) -> Bool) throws -> [DeferredFigure] {
    let folder = folders.data.appending(path: "input-memory")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: folder) }
    var figures: [DeferredFigure] = []
    // The quick run (CI) measures 1 MB files, and leaves out XML: Foundation's XML parser takes 2 s a megabyte.
    for kind in inputMemoryKinds where !(quick && kind == "xml_plist") {
        for megabytes in quick ? [1] : [1, 8, 60] {
            let name = "open_memory_\(kind)_\(megabytes)mb"
            guard includes(name) else { continue }
            log("running \(name)")
            let input = try writeInput(kind: kind, bytes: megabytes << 20, folder: folder)
            // The baseline: the same kind of store, one key.
            let empty = try writeInput(kind: kind == "shared_plist" ? "binary_plist" : kind, bytes: 1, folder: folder)
            let baseline = try inputMemoryChild(empty.spec).peak
            let measured = try inputMemoryChild(input.spec)
            let ratio = Double(measured.peak) / Double(input.size)
            let beyond = Double(measured.peak - baseline) / Double(input.size)
            let met = beyond <= inputMemoryTarget
            figures.append(
                DeferredFigure(
                    name: name,
                    line: "\(String(format: "%.1f", Double(input.size) / 1_048_576)) MB file: peak "
                        + "\(String(format: "%.0f", Double(measured.peak) / 1_048_576)) MB (\(String(format: "%.1f", ratio))× "
                        + "its size, \(String(format: "%.1f", beyond))× beyond an empty file's; ≤ 8 \(met ? "met" : "MISSED")) "
                        + "in \(String(format: "%.2f", measured.seconds)) s, \(measured.outcome.prefix(60))",
                    met: met,
                    json:
                        "\"file_bytes\":\(input.size),\"peak_bytes\":\(measured.peak),\"empty_peak_bytes\":\(baseline),"
                        + "\"peak_over_size\":\(jsonNumber(ratio)),\"beyond_empty_over_size\":\(jsonNumber(beyond)),"
                        + "\"seconds\":\(jsonNumber(measured.seconds)),\"target\":\(jsonNumber(inputMemoryTarget)),"
                        + "\"opened\":\(measured.outcome == "ok")"))
        }
    }
    return figures
}
