import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Where Prefs keeps its files, from the XDG base-directory variables: read once per process, at first use, so
/// every default store agrees on its folders for the life of the process.
///
/// Following the XDG specification, a variable that is unset, empty or not an absolute path falls back to a
/// folder under `$HOME`, and only when `$HOME` is unusable too under the account's home folder. So `HOME=/tmp/x`
/// keeps a program (and its tests) away from the real `~/.config`.
struct Locations: Sendable, Equatable {
    /// `$XDG_CONFIG_HOME`, or `$HOME/.config`: the UserDefaults domains and vault key files.
    let configHome: URL
    /// `$XDG_DATA_HOME`, or `$HOME/.local/share`: vaults.
    let dataHome: URL
    /// `$XDG_STATE_HOME`, or `$HOME/.local/state`: what Prefs remembers about vaults between runs.
    let stateHome: URL
    /// `$XDG_CONFIG_DIRS` (colon-separated, most important first), or `/etc/xdg`: system-wide defaults (never forced
    /// values: see ``ManagedLocation``). Entries that are not absolute paths are ignored, as the specification says.
    let configDirs: [URL]

    /// The locations of this process, resolved on first use.
    static let current = Locations(
        environment: variables(["HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CONFIG_DIRS"]))

    /// The values of `names` in this process's environment, read directly: `ProcessInfo`'s environment copies every
    /// variable into a dictionary, a measurable part of an app's first preference read.
    static func variables(_ names: [String]) -> [String: String] {
        var found: [String: String] = [:]
        for name in names {
            if let value = getenv(name) { found[name] = String(cString: value) }
        }
        return found
    }

    init(environment: [String: String]) {
        let home = Self.home(environment)
        func folder(_ variable: String, _ fallback: String) -> URL {
            if let value = environment[variable], value.hasPrefix("/") {
                return URL(filePath: value, directoryHint: .isDirectory)
            }
            return home.appending(path: fallback, directoryHint: .isDirectory)
        }
        configHome = folder("XDG_CONFIG_HOME", ".config")
        dataHome = folder("XDG_DATA_HOME", ".local/share")
        stateHome = folder("XDG_STATE_HOME", ".local/state")
        let dirs = (environment["XDG_CONFIG_DIRS"] ?? "").split(separator: ":").filter { $0.hasPrefix("/") }
        configDirs = (dirs.isEmpty ? ["/etc/xdg"] : dirs).map { URL(filePath: String($0), directoryHint: .isDirectory) }
    }

    /// `$HOME` when it is an absolute path, otherwise the home folder of the account running the process.
    static func home(_ environment: [String: String]) -> URL {
        if let home = environment["HOME"], home.hasPrefix("/") {
            return URL(filePath: home, directoryHint: .isDirectory)
        }
        if let entry = getpwuid(geteuid()), let directory = entry.pointee.pw_dir {
            return URL(filePath: String(cString: directory), directoryHint: .isDirectory)
        }
        return URL(filePath: "/", directoryHint: .isDirectory)
    }

    /// Checks that `name` can be one file or folder name (`what` names it in the message, e.g. "a suite name"), so
    /// that a suite name or an app identifier can never reach outside its folder.
    static func fileNameProblem(_ name: String, what: String, suffix: String = "") -> String? {
        if name.isEmpty { return "\(what) cannot be empty" }
        if name.contains("/") { return "\(what) cannot contain '/'" }
        if name.contains("..") { return "\(what) cannot contain '..'" }
        if name.utf8.contains(0) { return "\(what) cannot contain NUL" }
        if name.utf8.count + suffix.utf8.count > 255 {
            return suffix.isEmpty
                ? "\(what) must fit a 255-byte file name" : "\(what) must fit a 255-byte file name with '\(suffix)'"
        }
        return nil
    }
}

/// Where forced (managed) values come from: one folder fixed in the library, never taken from the environment, whose
/// files count only when root owns them and every folder above them and none is writable by group or others, as
/// sudo checks its configuration.
package struct ManagedLocation: Sendable, Equatable {
    /// The folder of the `<domain>.plist` files.
    let folder: URL
    /// The highest folder checked: the managed folder and every folder above it up to this one are checked.
    let checkedFrom: String
    /// The owner every checked file and folder must have: root, except under a test's hook.
    let owner: uid_t

    /// `/etc/xdg/managed-preferences`, checked up to `/`, owned by root.
    static let system = ManagedLocation(
        folder: URL(filePath: "/etc/xdg/managed-preferences", directoryHint: .isDirectory), checkedFrom: "/", owner: 0)

    private static let override = Mutex<ManagedLocation?>(nil)

    /// The location of this process: ``system`` unless a test moved it.
    static var current: ManagedLocation { override.withLock { $0 } ?? system }

    /// For this package's tests only (a child process of a test calls it before opening any store): forced values
    /// come from `folder`, checked up to `checkedFrom`, owned by `owner`. Not an environment variable, so no user can
    /// move the location of an app.
    package static func useForTesting(folder: String, checkedFrom: String, owner: UInt32) {
        let location = ManagedLocation(
            folder: URL(filePath: folder, directoryHint: .isDirectory), checkedFrom: checkedFrom, owner: owner)
        override.withLock { $0 = location }
    }

    /// The problem that keeps a file opened at `path` (`info` from its descriptor) from counting as forced, or nil
    /// when it and every folder above it, up to ``checkedFrom``, belong to ``owner`` and only it can write them.
    func trustProblem(ofFile info: stat, path: String) -> String? {
        if let problem = Self.problem(info, owner: owner, what: "it") { return problem }
        let folderPath = POSIX.parentPath(of: path)
        guard let resolved = realpath(folderPath, nil) else { return "its folder cannot be resolved" }
        var folder = String(cString: resolved)
        free(resolved)
        let top = realpath(checkedFrom, nil).map { pointer in
            defer { free(pointer) }
            return String(cString: pointer)
        }
        guard let top, folder == top || folder.hasPrefix(top == "/" ? "/" : top + "/") else {
            return "it is not inside \(checkedFrom)"
        }
        while true {
            var folderInfo = stat()
            guard stat(folder, &folderInfo) == 0 else { return "folder \(folder) cannot be examined" }
            if let problem = Self.problem(folderInfo, owner: owner, what: "folder \(folder)") { return problem }
            if folder == top { return nil }
            folder = POSIX.parentPath(of: folder)
        }
    }

    private static func problem(_ info: stat, owner: uid_t, what: String) -> String? {
        if info.st_uid != owner {
            return "\(what) is owned by uid \(info.st_uid), not \(owner == 0 ? "root" : "uid \(owner)")"
        }
        if info.st_mode & 0o022 != 0 {
            return "\(what) is writable by group or others (mode \(String(info.st_mode & 0o7777, radix: 8)))"
        }
        return nil
    }
}
