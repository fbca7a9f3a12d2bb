// The Prefs demo: an app-style settings model, typed keys, helpers, live observation, a secret in an
// encrypted vault, what ends up on disk, and the app's keys described to `prefs`. It runs in a temporary folder unless
// PREFS_DEMO_DIR is set.
import Foundation
import Observation
import Prefs

enum Theme: String, Codable, CaseIterable, Sendable {
    case light, dark, system
}

struct EditorSettings: Codable, Sendable, Equatable {
    var fontSize = 13
    var showsLineNumbers = true
}

extension PrefKey where Value == Bool {
    static let sendsAnalytics = PrefKey(
        "sendsAnalytics", default: false, schema: "Whether anonymous usage statistics are sent")
}

@Observable
final class Preferences {
    @ObservationIgnored @StoredValue(key: "hasHapticsEnabled") var hasHapticsEnabled = false
    @ObservationIgnored @StoredValue(key: "lastOpenedDate") var lastOpenedDate: Date? = nil
    @ObservationIgnored @StoredValue(key: "currentTheme", schema: "Colour scheme of the windows")
    var currentTheme: Theme = .light
    @ObservationIgnored @StoredValue(key: "fontSize", schema: .init("Editor font size, in points", range: 8...72))
    var fontSize = 13
    @ObservationIgnored @StoredValue(key: "editor") var editor = EditorSettings()
    @ObservationIgnored @StoredValue(key: "favoriteTags") var favoriteTags: [String] = []
    @ObservationIgnored @StoredValue(key: "featureFlags") var featureFlags: [String: Bool] = [:]
    @ObservationIgnored @StoredValue(.sendsAnalytics) var sendsAnalytics
}

final class Session {
    @SecureStoredValue<String>(key: "authToken") var authToken
    @SecureStoredValue<[String]>(key: "trustedDevices") var trustedDevices
}

func section(_ title: String) { print("\n== \(title)") }

let root: URL
if let chosen = ProcessInfo.processInfo.environment["PREFS_DEMO_DIR"] {
    root = URL(filePath: chosen, directoryHint: .isDirectory)
} else {
    root = FileManager.default.temporaryDirectory.appending(path: "prefs-demo-\(UUID().uuidString.prefix(8))")
}
// Every folder Prefs could use goes under `root`, before anything reads them: the vault's rollback record
// (`$XDG_STATE_HOME/prefs/vaults`) included, so nothing is written to the real home.
for (variable, folder) in [("XDG_CONFIG_HOME", "config"), ("XDG_DATA_HOME", "data"), ("XDG_STATE_HOME", "state")] {
    setenv(variable, root.appending(path: folder).path(percentEncoded: false), 1)
}
print("Prefs demo: everything is written under \(root.path) (your real preferences are not touched)")

// As an app starts: its configuration first, then the default stores, where the README says an app's files go:
// $XDG_CONFIG_HOME/<app>.plist, $XDG_DATA_HOME/<app>/secrets.vault and its key $XDG_CONFIG_HOME/<app>/secrets.key.
PrefsConfig.configure(PrefsConfiguration(appIdentifier: "com.example.demo"))
PrefsConfig.errorHandler = { report in print("  reported: \(report)") }
let plist = SuiteFileStore.standard.url
let (vaultURL, keyURL) = EncryptedFileStore.defaultLocation(appIdentifier: PrefsConfig.configuration.appIdentifier)

let prefs = Preferences()
// The keys are declared: publish them, so that `prefs` can describe, check and safely edit them from outside.
PrefsConfig.publishSchema()

// The subscription starts when `values` is read, so read it before the changes are made. The observer collects
// what it sees, and its lines are printed once it is done, under their own heading.
let themes = prefs.$currentTheme.values
let observed = Task {
    var seen: [Theme] = []
    for await theme in themes {
        seen.append(theme)
        if seen.count == 3 { break }
    }
    return seen
}

section("Setting values")
prefs.$currentTheme.set(.dark)
prefs.$lastOpenedDate.set(Date(timeIntervalSinceReferenceDate: 786_000_000.125))
prefs.$hasHapticsEnabled.toggle()
prefs.$editor.set(\.fontSize, to: 15)
prefs.$favoriteTags.append("swfit")
prefs.$favoriteTags.replace("swfit", with: "swift")
prefs.$favoriteTags.togglePresence("linux")
prefs.$featureFlags.update(key: "darkMode", value: true)
prefs.sendsAnalytics = true
prefs.fontSize = 15
print("  theme=\(prefs.currentTheme) haptics=\(prefs.hasHapticsEnabled) editor=\(prefs.editor)")
print("  tags=\(prefs.favoriteTags) flags=\(prefs.featureFlags) analytics=\(prefs.sendsAnalytics)")
print("  lastOpenedDate keeps its fraction: \(prefs.lastOpenedDate!.timeIntervalSinceReferenceDate)")

section("Observation framework: withObservationTracking sees a change made elsewhere")
withObservationTracking {
    _ = prefs.hasHapticsEnabled
} onChange: {
    print("  onChange fired for hasHapticsEnabled")
}
// A second model on the same store: a different wrapper of the same key. `onChange` runs during this write.
Preferences().hasHapticsEnabled = false

section("Observing currentTheme with for await (current value first, then changes)")
print("  resetting currentTheme, back to its default")
prefs.$currentTheme.reset()
for theme in await observed.value { print("  observer saw: \(theme)") }

section("A secret in the encrypted vault")
let session = Session()
try session.$authToken.set("eyJhbGciOiJIUzI1NiJ9.demo")
try session.$trustedDevices.append("laptop")
print("  authToken is set: \(session.authToken != nil); description: \(session.$authToken)")
print("  trustedDevices: \(session.trustedDevices ?? [])")
let vaultBytes = try Data(contentsOf: vaultURL)
let leaked = vaultBytes.range(of: Data("eyJhbGciOiJIUzI1NiJ9".utf8)) != nil
print("  vault is \(vaultBytes.count) bytes; plaintext in file: \(leaked)")

section("Bad input is an error, not a crash")
do { _ = try SuiteFileStore(suiteName: "../escape") } catch { print("  \(error)") }
prefs.fontSize = 300
print("  fontSize is still \(prefs.fontSize): 300 is outside the range its declaration allows (8 to 72)")

section("On disk")
print("  the files as they are now, at the end of the demo: after every step above (so currentTheme, reset, is absent")
print("  and reads as its default, and hasHapticsEnabled is false again). <app> is com.example.demo:")
for (what, url) in [
    ("$XDG_CONFIG_HOME/<app>.plist", plist), ("$XDG_DATA_HOME/<app>/secrets.vault", vaultURL),
    ("$XDG_CONFIG_HOME/<app>/secrets.key", keyURL),
] {
    let attributes = try FileManager.default.attributesOfItem(atPath: url.path)
    let mode = String((attributes[.posixPermissions] as? Int) ?? 0, radix: 8)
    print("  \(what): \(url.path)  mode \(mode)  \((attributes[.size] as? Int) ?? 0) bytes")
}
let reread = try PropertyListSerialization.propertyList(from: Data(contentsOf: plist), format: nil)
if let values = reread as? [String: Any] {
    print("  the standard domain as Foundation reads it:")
    for key in values.keys.sorted() { print("    \(key) = \(values[key]!)") }
}
section("Described keys: what `prefs` sees from outside the app")
// The `prefs` tool, built beside this demo (`make demo` builds it), run as another program would.
let tool = URL(filePath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
    .appending(path: "prefs")
if FileManager.default.isExecutableFile(atPath: tool.path) {
    for arguments in [["list-keys", "com.example.demo"], ["describe", "com.example.demo", "fontSize"]] {
        print("  $ prefs \(arguments.joined(separator: " "))")
        let run = Process()
        run.executableURL = tool
        run.arguments = arguments
        let output = Pipe()
        run.standardOutput = output
        try run.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        run.waitUntilExit()
        for line in text.split(separator: "\n") { print("    \(line)") }
    }
} else {
    print("  build the tool to see it here: swift build --product prefs (make demo does)")
}
print("\nDone. Remove the folder with: rm -rf \(root.path)")
