import Foundation
import Prefs
import Synchronization

enum SchemaTheme: String, Codable, CaseIterable, Sendable {
    case light, dark, system
}

extension PrefKey where Value == Int {
    static let schemaFontSize = PrefKey(
        "fontSize", default: 13, schema: .init("Editor font size, in points", range: 8...72))
}

/// An app that describes its keys, declared on the standard domain the README way.
final class DescribedSettings {
    @StoredValue(.schemaFontSize) var fontSize
    @StoredValue(key: "theme", schema: "Colour scheme of the windows") var theme: SchemaTheme = .light
    @StoredValue(key: "accent", schema: .init("Accent colour", choices: ["blue", "green"])) var accent = "blue"
    @StoredValue(key: "zoom", schema: .init(range: 0.5...4)) var zoom = 1.0
    @StoredValue(key: "lastOpened") var lastOpened: Date? = nil
    @StoredValue(key: "hasHaptics") var hasHaptics = false
}

/// Commands for the schema tests: `schema-app APP ACTION`, with `SCHEMA_PREFIX` as the environment prefix and
/// `SCHEMA_MANAGED_FOLDER`/`SCHEMA_MANAGED_TOP` as the stand-in for /etc/xdg/managed-preferences.
enum SchemaAppCommands {
    static func run(_ arguments: [String]) -> Bool {
        guard arguments.first == "schema-app" else { return false }
        let reports = launch(as: arguments[1])
        let settings = DescribedSettings()
        switch arguments[2] {
        case "publish":
            // publish [FOLDER]: the files written, one a line.
            let folder = arguments.count > 3 ? URL(filePath: arguments[3], directoryHint: .isDirectory) : nil
            for url in PrefsConfig.publishSchema(into: folder) { emit("wrote \(url.path(percentEncoded: false))") }
        case "publish-limited":
            // publish-limited LIMIT: publishes with RLIMIT_FSIZE lowered to LIMIT bytes, then says whether SIGXFSZ
            // still has its default action and none is pending (the process is alive to say so).
            let written = ReliabilityCommands.withFileSizeLimit(Int(arguments[3])!) { PrefsConfig.publishSchema() }
            emit("wrote \(written.count)")
            var pending = sigset_t()
            sigpending(&pending)
            let previous = signal(SIGXFSZ, SIG_DFL)
            emit(previous == nil && sigismember(&pending, SIGXFSZ) == 0 ? "SIGXFSZ untouched" : "SIGXFSZ changed")
        case "read":
            // Every value as the app reads it, twice (a second read reports nothing new).
            for _ in 0..<2 {
                emit(
                    "fontSize=\(settings.fontSize) theme=\(settings.theme) accent=\(settings.accent) "
                        + "zoom=\(settings.zoom)")
            }
        case "write":
            // The throwing API refuses a value outside the range; the wrapper's setter reports it and keeps the value.
            do {
                try SuiteFileStore.standard.set(300, for: .schemaFontSize)
                emit("stored 300")
            } catch {
                emit("thrown: \(error)")
            }
            settings.accent = "purple"
            settings.$zoom.update { $0 = 9 }
            settings.fontSize = 20
            emit("fontSize=\(settings.fontSize) accent=\(settings.accent) zoom=\(settings.zoom)")
        default:
            fail("unknown schema-app action \(arguments[2])")
        }
        for report in reports.list.withLock({ $0 }) { emit("report: \(report)") }
        return true
    }

    /// What an app of the schema tests does first: its identifier, its managed folder's stand-in and environment
    /// prefix from `SCHEMA_MANAGED_FOLDER`, `SCHEMA_MANAGED_TOP` and `SCHEMA_PREFIX`, and an error handler that keeps
    /// its reports, returned.
    static func launch(as app: String) -> AppReports {
        let environment = ProcessInfo.processInfo.environment
        if let folder = environment["SCHEMA_MANAGED_FOLDER"] {
            ManagedLocation.useForTesting(
                folder: folder, checkedFrom: environment["SCHEMA_MANAGED_TOP"]!, owner: getuid())
        }
        let reports = AppReports()
        PrefsConfig.errorHandler = { report in reports.list.withLock { $0.append("\(report)") } }
        PrefsConfig.configure(PrefsConfiguration(appIdentifier: app, environmentPrefix: environment["SCHEMA_PREFIX"]))
        return reports
    }
}

/// The reports an app of the schema tests received, in order.
final class AppReports: Sendable {
    let list = Mutex<[String]>([])
}

/// `schema-cost APP COUNT`: what describing keys adds to a launch, in milliseconds, each from the monotonic clock:
/// declaring COUNT keys (each with a description and a range) on the standard domain, publishing their schema the
/// first time (the file written), and publishing it again with nothing changed (the file read and compared).
enum SchemaCostCommand {
    static func run(_ arguments: [String]) -> Bool {
        guard arguments.first == "schema-cost", arguments.count == 3, let count = Int(arguments[2]) else {
            return false
        }
        PrefsConfig.configure(PrefsConfiguration(appIdentifier: arguments[1]))
        func milliseconds(_ body: () -> Void) -> String {
            let start = ContinuousClock.now
            body()
            let elapsed = ContinuousClock.now - start
            return String(
                format: "%.2f", Double(elapsed.components.attoseconds) / 1e15 + Double(elapsed.components.seconds) * 1e3
            )
        }
        var wrappers: [StoredValue<Int>] = []
        wrappers.reserveCapacity(count)
        let declare = milliseconds {
            for index in 0..<count {
                wrappers.append(
                    StoredValue(key: "key\(index)", default: 5, schema: .init("Setting number \(index)", range: 0...10))
                )
            }
        }
        // The same declarations on a suite outside the preferences folder, whose keys no schema records.
        let scratch = FileManager.default.temporaryDirectory.appending(path: "\(arguments[1])-\(getpid())")
        let elsewhere = try! SuiteFileStore(suiteName: "cost", directory: scratch)
        var others: [StoredValue<Int>] = []
        let declareUnrecorded = milliseconds {
            for index in 0..<count {
                others.append(
                    StoredValue(
                        key: "key\(index)", default: 5, schema: .init("Setting number \(index)", range: 0...10),
                        store: elsewhere))
            }
        }
        emit("declare-unrecorded=\(declareUnrecorded)")
        var written: [URL] = []
        let first = milliseconds { written = PrefsConfig.publishSchema() }
        var rewritten: [URL] = []
        let again = milliseconds { rewritten = PrefsConfig.publishSchema() }
        emit(
            "declare=\(declare) publish-first=\(first) (files \(written.count)) publish-unchanged=\(again) (files \(rewritten.count))"
        )
        return true
    }
}
