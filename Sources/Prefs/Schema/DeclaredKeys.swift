import Foundation
import Synchronization

/// The keys declared in this process on each domain of the preferences folder, kept until a schema is published.
///
/// Declaring a key records a closure that describes it, under a lock, and nothing else: the description (type names,
/// enum cases, the default in stored form) is made only by ``publish(into:environmentPrefix:)``, so declaring a
/// preference costs the same whether or not the app ever publishes its schema.
package enum DeclaredKeys {
    /// By domain, then by key: the first declaration of a key, which is also the one whose default applies.
    private static let declared = Mutex<[String: [String: @Sendable () -> KeyDescription]]>([:])

    /// Records a declaration of `key` on `domain`; a later declaration of the same key changes nothing.
    static func record(_ key: String, in domain: String, _ describe: @escaping @Sendable () -> KeyDescription) {
        declared.withLock { declared in
            if declared[domain]?[key] == nil { declared[domain, default: [:]][key] = describe }
        }
    }

    /// The schemas of the domains keys were declared on in this process.
    package static func schemas(environmentPrefix: (String) -> String?) -> [DomainSchema] {
        let snapshot = declared.withLock { $0 }
        return snapshot.keys.sorted().map { domain in
            DomainSchema(
                domain: domain, environmentPrefix: environmentPrefix(domain),
                keys: snapshot[domain]!.mapValues { $0() })
        }
    }

    /// Publishes the schema of every domain keys were declared on into `folder` (`<folder>/<domain>.json`), merged
    /// with what the file already holds: a key declared here replaces its entry, the others stay, so processes of
    /// one app that declare different keys build one schema. A file left as it would be is not written. A file of a
    /// later version is left alone; one that cannot be read is replaced; either is reported once. Returns the files
    /// written.
    static func publish(into folder: URL, environmentPrefix: (String) -> String?) -> [URL] {
        var written: [URL] = []
        for schema in schemas(environmentPrefix: environmentPrefix) {
            let url = folder.appending(path: schema.domain + ".json")
            let path = url.path(percentEncoded: false)
            var merged = schema
            do throws(SchemaFileProblem) {
                if let existing = try SchemaFiles.read(at: path) {
                    merged.keys = existing.keys.merging(schema.keys) { _, declared in declared }
                    if merged.environmentPrefix == nil { merged.environmentPrefix = existing.environmentPrefix }
                    if merged == existing { continue }
                }
            } catch {
                ErrorReporter.report(error, key: "", operation: .write, file: path)
                if error.isNewer { continue }
            }
            // Through Prefs' own writes, like a store's file: past RLIMIT_FSIZE a write is refused with EFBIG, where
            // Foundation's `Data.write` raised SIGXFSZ, whose default action ends the process.
            do {
                try POSIX.createDirectory(atPath: folder.path(percentEncoded: false), mode: 0o755)
                let fileSystem = POSIXFileSystem()
                let temporary = try fileSystem.writeTemporary(
                    beside: path, data: merged.jsonDocument(), mode: 0o644, durable: true)
                _ = try fileSystem.commit(temporary, to: path)
                try? fileSystem.syncFolder(of: path)
                written.append(url)
            } catch {
                let reason = (error as? SystemCallError)?.prefsError ?? error
                ErrorReporter.report(
                    SchemaFileProblem(path: path, reason: "it could not be written (\(reason))"), key: "",
                    operation: .write, file: path)
            }
        }
        return written
    }
}
