import Foundation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

#if canImport(Glibc)
    import Glibc
#endif

/// Stores on file systems that lack optional features, mounted by the test: ramfs keeps no extended attributes
/// (as vfat, exFAT, NFSv3 and many FUSE and SMB mounts do not), tmpfs keeps its files in memory. Every store creates,
/// writes and reads its file there, and an app's wrappers on the default stores return. Mounting needs root (CI runs
/// as root); where it is refused the tests are skipped, saying why.
@Suite(.ownThreads, .enabled(if: mountRefusal == nil, "mounting is refused here (it needs root)"))
struct FileSystemFeatureTests {
    /// A file system of `type` mounted at `path` until ``unmount()``.
    struct Mount {
        let path: String

        init(type: String, at path: String) throws {
            let result = try ChildProcess.run(
                URL(filePath: "/bin/mount"), ["-t", type, "-o", "mode=0700", "none", path], timeLimit: .seconds(20))
            guard result.status == 0 else {
                throw PrefsError.io(path: path, operation: "mount", errno: 0, message: result.error)
            }
            self.path = path
        }

        func unmount() {
            _ = try? ChildProcess.run(URL(filePath: "/bin/umount"), ["-l", path], timeLimit: .seconds(20))
        }
    }

    @Test(arguments: ["ramfs", "tmpfs"])
    func everyStoreCreatesWritesAndReadsItsFile(_ type: String) throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let point = directory.path("mnt")
        mkdir(point, 0o700)
        let mount = try Mount(type: type, at: point)
        defer { mount.unmount() }
        let folder = URL(filePath: point, directoryHint: .isDirectory)
        let stores: [any KeyValueStore] = [
            try FileStore(url: folder.appending(path: "settings.json"), onDamage: .keepAside),
            try SuiteFileStore(suiteName: "suite", directory: folder, onDamage: .keepAside),
            try EncryptedFileStore(
                url: folder.appending(path: "secrets.vault"), key: .keyFile(folder.appending(path: "secrets.key"))),
        ]
        for store in stores {
            try store.setValue(.int(1), forKey: "count")
            try store.updateValue(forKey: "count") { old in
                guard case .int(let count)? = old else { return nil }
                return .int(count + 1)
            }
            #expect(try store.value(forKey: "count") == .int(2), "\(store)")
        }
        #expect(try FileStore(url: folder.appending(path: "settings.json")).value(forKey: "count") == .int(2))
        #expect(try SuiteFileStore(suiteName: "suite", directory: folder).value(forKey: "count") == .int(2))
        let names = try FileManager.default.contentsOfDirectory(atPath: point)
        #expect(!names.contains { $0.contains(".damaged-") || $0.contains(".tmp-") }, "\(names)")
    }

    /// The README's app, its wrappers without `store:` on the standard domain and the default vault, with its
    /// folders on a ramfs mount: it reads, writes and exits.
    @Test func anAppsWrappersReturnOnAFileSystemWithoutExtendedAttributes() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let point = directory.path("mnt")
        mkdir(point, 0o700)
        let mount = try Mount(type: "ramfs", at: point)
        defer { mount.unmount() }
        let environment = ["XDG_CONFIG_HOME": point + "/config", "XDG_DATA_HOME": point + "/data"]
        let launch = try ChildProcess.run(["launch"], environment: environment, timeLimit: .seconds(30))
        #expect(launch.status == 0 && !launch.timedOut, "\(launch.error)")
        #expect(launch.lines.contains("after-set zoom=2.0"), "\(launch.lines)")
        let again = try ChildProcess.run(["launch"], environment: environment, timeLimit: .seconds(30))
        #expect(again.lines.contains("zoom=2.0 theme=light lastExport=nil"), "\(again.lines)")
        let names = try FileManager.default.contentsOfDirectory(atPath: point + "/config")
        #expect(!names.contains { $0.contains(".damaged-") }, "\(names)")
    }
}

/// Why a file system cannot be mounted here, or nil when it can (tried once, on a mount made and removed).
private let mountRefusal: String? = {
    guard getuid() == 0 else { return "mounting a file system needs root" }
    guard let directory = try? TempDir() else { return "no temporary folder" }
    defer { directory.cleanup() }
    let point = directory.path("probe")
    mkdir(point, 0o700)
    guard let mounted = try? FileSystemFeatureTests.Mount(type: "ramfs", at: point) else {
        return "mount -t ramfs was refused"
    }
    mounted.unmount()
    return nil
}()
