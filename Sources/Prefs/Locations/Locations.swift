import Foundation

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
    /// `$XDG_DATA_DIRS` (colon-separated, most important first), or `/usr/local/share` and `/usr/share`: the schemas
    /// installed with apps (`<dir>/prefs/schemas`).
    let dataDirs: [URL]

    /// The locations of this process, resolved on first use.
    static let current = Locations(
        environment: variables([
            "HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CONFIG_DIRS", "XDG_DATA_DIRS",
        ]))

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
        func folders(_ variable: String, _ fallback: [Substring]) -> [URL] {
            let dirs = (environment[variable] ?? "").split(separator: ":").filter { $0.hasPrefix("/") }
            return (dirs.isEmpty ? fallback : dirs).map { URL(filePath: String($0), directoryHint: .isDirectory) }
        }
        configDirs = folders("XDG_CONFIG_DIRS", ["/etc/xdg"])
        dataDirs = folders("XDG_DATA_DIRS", ["/usr/local/share", "/usr/share"])
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
        if name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            return "\(what) cannot contain control characters (a line break, a tab, an escape)"
        }
        if name.utf8.count + suffix.utf8.count > 255 {
            return suffix.isEmpty
                ? "\(what) must fit a 255-byte file name" : "\(what) must fit a 255-byte file name with '\(suffix)'"
        }
        return nil
    }
}
