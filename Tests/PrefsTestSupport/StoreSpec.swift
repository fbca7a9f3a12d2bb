import Foundation
public import Prefs

/// Names a store so a parent test and a child process can open the same one: `json:/tmp/x.json`,
/// `plist:/tmp/dir:suite`, `vault:/tmp/v.vault:/tmp/v.key`.
public enum StoreSpec {
    /// Opens the store a spec names.
    public static func open(_ spec: String) throws -> any KeyValueStore {
        let parts = spec.split(separator: ":", maxSplits: 2).map(String.init)
        switch parts.first {
        case "json" where parts.count == 2:
            return try FileStore(url: URL(filePath: parts[1]))
        case "plist" where parts.count == 3:
            return try SuiteFileStore(suiteName: parts[2], directory: URL(filePath: parts[1]))
        case "vault" where parts.count == 3:
            return try EncryptedFileStore(url: URL(filePath: parts[1]), key: .keyFile(URL(filePath: parts[2])))
        case "memory":
            return InMemoryStore()
        default:
            throw SpecError(spec: spec)
        }
    }

    package struct SpecError: Error, CustomStringConvertible {
        let spec: String
        package init(spec: String) { self.spec = spec }
        package var description: String { "unknown store spec \(spec)" }
    }
}
