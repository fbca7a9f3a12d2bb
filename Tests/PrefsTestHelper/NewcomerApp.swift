import Foundation
import Observation
import Prefs
import Synchronization

/// The app a newcomer writes from the README: an enum, a list, a `Codable` struct, a number in a range, an optional
/// date and a secret, and beside them a colour that decodes itself from text and a default computed when read.
enum NewcomerAccent: String, Codable, CaseIterable, Sendable {
    case blue, green, orange
}

struct NewcomerFrame: Codable, Equatable, Sendable {
    var x = 0
    var y = 0
    var width = 800
    var height = 600
    var title: String?
}

/// A colour kept as `"#rrggbb"`: its own `init(from:)` refuses other text, which no schema can describe.
struct NewcomerColour: Codable, Equatable, Sendable, CustomStringConvertible {
    var hex = "#336699"

    init() {}

    init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard text.count == 7, text.first == "#", text.dropFirst().allSatisfy(\.isHexDigit) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not #rrggbb"))
        }
        hex = text
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(hex)
    }

    var description: String { hex }
}

/// What the computed default of `columns` answers: set by the `answer N` line of `newcomer-app APP observe`.
let newcomerColumnsAnswer = Atomic<Int>(2)

extension PrefKey where Value == Int {
    static let newcomerColumns = PrefKey("columns", default: { newcomerColumnsAnswer.load(ordering: .relaxed) })
}

@Observable
final class NewcomerSettings {
    @ObservationIgnored @StoredValue(key: "accent") var accent: NewcomerAccent = .blue
    @ObservationIgnored @StoredValue(key: "recentFiles") var recentFiles: [String] = []
    @ObservationIgnored @StoredValue(key: "windowFrame") var windowFrame = NewcomerFrame()
    @ObservationIgnored @StoredValue(key: "fontSize", schema: .init("Editor font size, in points", range: 8...72))
    var fontSize = 13
    @ObservationIgnored @StoredValue(key: "lastExport") var lastExport: Date?
    @ObservationIgnored @StoredValue(key: "colour") var colour = NewcomerColour()
    @ObservationIgnored @StoredValue(.newcomerColumns) var columns
    @ObservationIgnored @SecureStoredValue<String>(key: "apiToken") var apiToken
}

/// `newcomer-app APP ACTION [-key value…]`, launched as `schema-app` is (`SCHEMA_PREFIX`, `SCHEMA_MANAGED_FOLDER`,
/// `SCHEMA_MANAGED_TOP`):
/// - `publish`: publishes the schema;
/// - `read`: prints each value as the app reads it, then every report;
/// - `observe`: the `columns` key observed through `values` and Observation; reads `answer N` (the computed default
///   now answers N, then prints `read V`), `read` and `quit` from standard input, and prints `value V` for each
///   value `values` yields and `tracked V` for each change Observation reports.
enum NewcomerAppCommands {
    static func run(_ arguments: [String]) async -> Bool {
        guard arguments.first == "newcomer-app" else { return false }
        let reports = SchemaAppCommands.launch(as: arguments[1])
        let settings = NewcomerSettings()
        switch arguments[2] {
        case "publish":
            for url in PrefsConfig.publishSchema() { emit("wrote \(url.path(percentEncoded: false))") }
        case "read":
            emit("accent=\(settings.accent)")
            emit("recentFiles=\(settings.recentFiles)")
            emit("windowFrame=\(settings.windowFrame.width)x\(settings.windowFrame.height)")
            emit("fontSize=\(settings.fontSize)")
            emit("lastExport=\(settings.lastExport.map { "\($0.timeIntervalSinceReferenceDate)" } ?? "nil")")
            emit("colour=\(settings.colour)")
            emit("columns=\(settings.columns)")
        case "observe":
            await observe(settings)
        default:
            fail("unknown newcomer-app action \(arguments[2])")
        }
        for report in reports.list.withLock({ $0 }) { emit("report: \(report)") }
        return true
    }

    private static func observe(_ settings: NewcomerSettings) async {
        let stream = settings.$columns.values
        // `ready` comes after the stream's first value and once Observation tracks the key.
        let (started, start) = AsyncStream.makeStream(of: Void.self)
        let printing = Task {
            for await value in stream {
                emit("value \(value)")
                start.finish()
            }
        }
        for await _ in started {}
        track(settings.$columns, announcing: false)
        emit("ready")
        while let line = readLine() {
            let words = line.split(separator: " ")
            switch words.first {
            case "answer":
                newcomerColumnsAnswer.store(Int(words[1])!, ordering: .relaxed)
                emit("read \(settings.columns)")
            case "read": emit("read \(settings.columns)")
            case "quit":
                printing.cancel()
                return
            default: fail("unknown line \(line)")
            }
        }
    }

    /// Prints `tracked V` for each change Observation reports, once it tracks the key again.
    private static func track(_ columns: StoredValue<Int>, announcing: Bool) {
        let value = withObservationTracking {
            columns.wrappedValue
        } onChange: {
            Task { track(columns, announcing: true) }
        }
        if announcing { emit("tracked \(value)") }
    }
}
