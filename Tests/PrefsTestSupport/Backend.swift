public import Foundation
public import Prefs

/// Every backend, each test in its own temporary folder (a test argument shows as its case name: `file`).
public enum Backend: String, CaseIterable, Sendable {
    case memory, file, userDefaults, vault

    /// The backends that keep their values in a file.
    public static let persistent: [Backend] = [.file, .userDefaults, .vault]

    /// The spec a child process uses to open the same store.
    public func spec(in directory: TempDir) -> String {
        switch self {
        case .memory: "memory"
        case .file: "json:" + directory.file("prefs.json").path
        case .userDefaults: "plist:" + directory.url.path + ":group.example"
        case .vault: "vault:" + directory.file("secrets.vault").path + ":" + directory.file("secrets.key").path
        }
    }

    /// Opens this backend's store in `directory`, as a child process given ``spec(in:)`` would.
    public func open(in directory: TempDir) throws -> any KeyValueStore { try StoreSpec.open(spec(in: directory)) }

    /// The file the store keeps its values in.
    public func dataFile(in directory: TempDir) -> URL? {
        switch self {
        case .memory: nil
        case .file: directory.file("prefs.json")
        case .userDefaults: directory.file("group.example.plist")
        case .vault: directory.file("secrets.vault")
        }
    }
}
