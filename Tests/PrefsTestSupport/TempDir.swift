public import Foundation

/// `let folder = try TempDir()` is a fresh private folder for one test, removed by `cleanup()`.
///
/// Every test target uses this one type, so a test never writes outside its own folder.
public struct TempDir: Sendable {
    /// `folder.url` is the folder.
    public let url: URL

    /// `folder.path` is the folder's path, without percent-encoding.
    public var path: String { url.path(percentEncoded: false) }

    /// `try TempDir("prefs-cli")` names a new folder under the system's temporary folder and, unless `create` is
    /// false (for tests of code that creates folders itself), creates it.
    public init(_ label: String = "prefs-tests", create: Bool = true) throws {
        url = FileManager.default.temporaryDirectory.appending(path: "\(label)-\(UUID().uuidString)")
        if create { try self.create() }
    }

    /// `try folder.create()` creates the folder (and its parents) if it does not exist yet.
    public func create() throws {
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    /// `try folder.createFolders(["config", "data/app"])` creates each of those folders inside it (and their parents).
    public func createFolders(_ names: [String]) throws {
        for name in names {
            try FileManager.default.createDirectory(at: file(name), withIntermediateDirectories: true)
        }
    }

    /// `folder.cleanup()` removes the folder and everything in it.
    public func cleanup() { try? FileManager.default.removeItem(at: url) }

    /// `folder.file("a.json")` is the URL of a file (or sub-folder) inside the folder.
    public func file(_ name: String) -> URL { url.appending(path: name) }

    /// `folder.path("a.json")` is the path of a file inside the folder.
    public func path(_ name: String) -> String { file(name).path(percentEncoded: false) }

    /// `try folder.contents()` lists the names in the folder, sorted.
    public func contents() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: path).sorted()
    }
}
