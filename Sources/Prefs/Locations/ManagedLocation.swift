import Foundation
import Synchronization

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
