import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The readers of the layers that come from outside the store: the command line, the environment and the
/// system-wide files under `$XDG_CONFIG_DIRS`. Each turns its source into plain values; ``LayerStack`` merges them.
package enum LayerSources {
    // MARK: Command-line arguments

    /// This process's argument layer, parsed once.
    static let processArguments = arguments(CommandLine.arguments)

    /// The argument layer of `arguments` (program name first), read as Foundation's UserDefaults reads it: each
    /// `-key value` pair whose value does not itself start with `-` sets `key` to the value
    /// (``FoundationBridge/argumentValue(_:)``).
    package static func arguments(_ arguments: [String]) -> [String: PrefValue] {
        var values: [String: PrefValue] = [:]
        var index = 0
        while index + 1 < arguments.count {
            let option = arguments[index]
            let text = arguments[index + 1]
            guard option.hasPrefix("-"), !text.hasPrefix("-") else {
                index += 1
                continue
            }
            let key = String(option.dropFirst())
            if !key.isEmpty { values[key] = FoundationBridge.argumentValue(text) }
            index += 2
        }
        return values
    }

    // MARK: Environment

    /// The variable that sets `key` under `prefix`: the prefix, then the key in upper case with a `_` before each
    /// upper-case letter that follows a lower-case letter or digit, and every character other than an ASCII letter
    /// or digit replaced by `_`. `fontSize` → `MYAPP_FONT_SIZE`, `ui.theme` → `MYAPP_UI_THEME`.
    package static func environmentName(forKey key: String, prefix: String) -> String {
        var name = prefix
        var previous: Character?
        for character in key {
            let isASCIIAlphanumeric = character.isASCII && (character.isLetter || character.isNumber)
            if character.isUppercase, let previous, previous.isASCII, previous.isLowercase || previous.isNumber {
                name.append("_")
            }
            name += isASCIIAlphanumeric ? character.uppercased() : "_"
            previous = character
        }
        return name
    }

    /// The environment layer for `keys`: each key whose variable is set takes the variable's text, read as an
    /// argument's value is. A variable that several of the keys map to is refused for all of them and returned in
    /// `ambiguous` with those keys.
    package static func environment(
        _ environment: [String: String], prefix: String, keys: some Sequence<String>
    ) -> (values: [String: PrefValue], ambiguous: [String: [String]]) {
        var byName: [String: [String]] = [:]
        for key in keys { byName[environmentName(forKey: key, prefix: prefix), default: []].append(key) }
        var values: [String: PrefValue] = [:]
        var ambiguous: [String: [String]] = [:]
        for (name, keys) in byName {
            guard let text = environment[name] else { continue }
            if keys.count > 1 {
                ambiguous[name] = keys.sorted()
            } else {
                values[keys[0]] = FoundationBridge.argumentValue(text)
            }
        }
        return (values, ambiguous)
    }

    // MARK: System-wide files

    /// Where the system-wide files of `domain` live, most important first.
    struct SystemFiles: Sendable, Equatable {
        /// Defaults below the user's values: `<dir>/managed-preferences/<domain>.plist` then `<dir>/<domain>.plist`
        /// for each folder of `$XDG_CONFIG_DIRS`. A managed file found there is only a default: anyone who can set
        /// the environment chooses those folders.
        let defaults: [URL]
        /// `<managed folder>/<domain>.plist`: forced values above everything, once the file passes the ownership check.
        let managed: URL
        let managedLocation: ManagedLocation

        init(domain: String, folders: [URL], managed location: ManagedLocation) {
            let name = domain + ".plist"
            managedLocation = location
            let managed = location.folder.appending(path: name)
            self.managed = managed
            defaults = folders.flatMap { folder in
                [folder.appending(path: "managed-preferences").appending(path: name), folder.appending(path: name)]
            }.filter { $0.standardizedFileURL != managed.standardizedFileURL }
        }
    }

    /// Reads files, most important first, into one layer where the first file that holds a key wins, with the file
    /// each key comes from. A missing file adds nothing; a file that cannot be read or decoded, or that `trust` refuses, adds nothing and its error
    /// is returned.
    static func read(_ files: [URL], trust: ManagedLocation? = nil) -> (
        values: [String: PrefValue], files: [String: String], errors: [any Error]
    ) {
        var values: [String: PrefValue] = [:]
        var origins: [String: String] = [:]
        var errors: [any Error] = []
        for url in files.reversed() {
            let path = url.path(percentEncoded: false)
            do {
                guard let data = try readSystemFile(atPath: path, trust: trust) else { continue }
                let read = try PropertyListFormat.decode(data, path: path)
                values.merge(read) { _, stronger in stronger }
                for key in read.keys { origins[key] = path }
            } catch {
                errors.append(error)
            }
        }
        return (values, origins, errors)
    }

    /// The contents of a system-wide file, or nil when there is none: through the same regular-file and size checks
    /// as a store's own file (a FIFO is refused without blocking, a file over the read limit without reading it).
    /// With `trust`, a symbolic link is refused and the file and its folders must pass ``ManagedLocation``'s check.
    private static func readSystemFile(atPath path: String, trust: ManagedLocation?) throws(PrefsError) -> Data? {
        try prefsIO { () throws(SystemCallError) -> Data? in
            guard let (fd, info) = try POSIX.openRegularFile(atPath: path, followingSymlinks: trust == nil) else {
                return nil
            }
            defer { close(fd) }
            if let trust, let problem = trust.trustProblem(ofFile: info, path: path) {
                throw SystemCallError(
                    path: path, operation: "trust managed preferences", errno: EPERM,
                    detail: "not applied as forced values: \(problem); forced values must be in files that root owns "
                        + "and only root can write, in folders that root owns and only root can write")
            }
            return try POSIX.readAll(fd, path: path, expectedSize: Int(info.st_size))
        }
    }
}
