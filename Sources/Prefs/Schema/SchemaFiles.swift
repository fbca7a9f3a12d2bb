package import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Where schemas live and how they are found, as GSettings schemas and `.desktop` files are: the user's own,
/// published by the app, in `$XDG_DATA_HOME/prefs/schemas`, and those installed with apps in
/// `<dir>/prefs/schemas` for each folder of `$XDG_DATA_DIRS`.
package enum SchemaFiles {
    /// The largest schema file read: far more than any app's keys take.
    static let maximumSize = 16 << 20

    /// `$XDG_DATA_HOME/prefs/schemas`, where an app publishes its schema.
    package static var userFolder: URL { folder(in: Locations.current.dataHome) }

    /// `<dir>/prefs/schemas` for each folder of `$XDG_DATA_DIRS`, most important first.
    package static var systemFolders: [URL] { Locations.current.dataDirs.map(folder(in:)) }

    /// The schema folder under a data folder such as `/usr/share`.
    package static func folder(in dataFolder: URL) -> URL {
        dataFolder.appending(path: "prefs/schemas", directoryHint: .isDirectory)
    }

    /// The schema of `domain` from every file found, the user's first: a key takes its entry from the most important
    /// file that has it. Files that cannot be used (damaged, of a later version) are left out and returned as
    /// problems; nil when no file was read.
    package static func load(domain: String, folders: [URL]? = nil) -> (
        schema: DomainSchema?, problems: [SchemaFileProblem], files: [String]
    ) {
        var schema: DomainSchema?
        var problems: [SchemaFileProblem] = []
        var files: [String] = []
        for folder in (folders ?? [userFolder] + systemFolders).reversed() {
            let path = folder.appending(path: domain + ".json").path(percentEncoded: false)
            do {
                guard let found = try read(at: path) else { continue }
                files.insert(path, at: 0)
                guard var merged = schema else {
                    schema = found
                    continue
                }
                merged.keys.merge(found.keys) { _, stronger in stronger }
                merged.environmentPrefix = found.environmentPrefix ?? merged.environmentPrefix
                schema = merged
            } catch {
                problems.insert(error, at: 0)
            }
        }
        return (
            schema.map { DomainSchema(domain: domain, environmentPrefix: $0.environmentPrefix, keys: $0.keys) },
            problems, files
        )
    }

    /// The schema at `path`, or nil when there is no file; a file that is not a regular file or too large is a
    /// problem like a damaged one.
    static func read(at path: String) throws(SchemaFileProblem) -> DomainSchema? {
        let data: Data?
        do {
            data = try prefsIO { () throws(SystemCallError) -> Data? in
                guard let (fd, info) = try POSIX.openRegularFile(atPath: path, maximumSize: maximumSize) else {
                    return nil
                }
                defer { close(fd) }
                return try POSIX.readAll(fd, path: path, expectedSize: Int(info.st_size), maximumSize: maximumSize)
            }
        } catch {
            throw SchemaFileProblem(path: path, reason: "it cannot be read (\(error))")
        }
        guard let data else { return nil }
        return try DomainSchema(document: data, path: path)
    }
}
