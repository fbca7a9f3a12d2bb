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
            return try UserDefaultsStore(suiteName: parts[2], directory: URL(filePath: parts[1]))
        case "vault" where parts.count == 3:
            return try EncryptedFileStore(url: URL(filePath: parts[1]), key: .keyFile(URL(filePath: parts[2])))
        case "memory":
            return InMemoryStore()
        default:
            throw SpecError(spec: spec)
        }
    }

    /// Opens the store a spec names with an engine of its own on `fileSystem` and `clock`: two stores opened so on
    /// one file exclude each other as two processes do.
    package static func open(_ spec: String, fileSystem: any FileSystem, clock: EngineClock) throws -> any KeyValueStore
    {
        let parts = spec.split(separator: ":", maxSplits: 2).map(String.init)
        switch parts.first {
        case "json" where parts.count == 2:
            return try FileStore(url: URL(filePath: parts[1]), fileSystem: fileSystem, clock: clock)
        case "plist" where parts.count == 3:
            return try UserDefaultsStore(
                suiteName: parts[2], directory: URL(filePath: parts[1]), fileSystem: fileSystem, clock: clock)
        case "vault" where parts.count == 3:
            return try EncryptedFileStore(
                url: URL(filePath: parts[1]), key: .keyFile(URL(filePath: parts[2])), fileSystem: fileSystem,
                clock: clock)
        case "memory":
            return InMemoryStore()
        default:
            throw SpecError(spec: spec)
        }
    }

    struct SpecError: Error, CustomStringConvertible {
        let spec: String
        var description: String { "unknown store spec \(spec)" }
    }
}
