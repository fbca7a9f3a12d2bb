import Foundation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

#if canImport(Glibc)
    import Glibc
#endif

/// A FIFO, a device, a huge sparse file or a dangling link where a store expects its file is refused at once, in a
/// child with a deadline, so a hang or a runaway read fails the test instead of stopping the suite.
@Suite(.ownThreads) struct SpecialFileTests {
    private static func expectRefused(
        _ spec: String, saying phrase: String, type: String = "PrefsError", maxMiB: Int = 100
    ) throws {
        // A child that blocked or read without end would be killed at its time limit, which runChild records.
        let result = try runChild(["try-open", spec])
        #expect(result.status == 0, "\(result.error)")
        let lines = result.lines
        #expect(lines.first?.hasPrefix("error \(type)") == true, "\(lines)")
        #expect(lines.first?.contains(phrase) == true, "\(lines)")
        let rss = lines.last.flatMap { Int($0.split(separator: " ").last ?? "") } ?? .max
        #expect(rss < maxMiB << 10, "max resident \(rss) KiB")
    }

    @Test func aFIFOAsTheDataFileIsRefusedWithoutBlocking() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let path = directory.file("store.json").path(percentEncoded: false)
        #expect(mkfifo(path, 0o600) == 0)
        try Self.expectRefused("json:\(path)", saying: "a FIFO, not a regular file")
    }

    @Test func aFIFOAsTheKeyFileIsRefusedWithoutBlocking() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let vault = directory.file("v.vault").path(percentEncoded: false)
        let key = directory.file("v.key").path(percentEncoded: false)
        #expect(mkfifo(key, 0o600) == 0)
        try Self.expectRefused("vault:\(vault):\(key)", saying: "a FIFO, not a regular file", type: "VaultError")
    }

    @Test func aDataFileLinkedToDevZeroIsRefusedWithoutReadingIt() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let path = directory.file("store.json").path(percentEncoded: false)
        #expect(symlink("/dev/zero", path) == 0)
        try Self.expectRefused("json:\(path)", saying: "a character device")
    }

    @Test func aHugeSparseFileIsRefusedBeforeItIsRead() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let path = directory.file("suite.plist").path(percentEncoded: false)
        let fd = open(path, O_CREAT | O_WRONLY, 0o600)
        #expect(fd >= 0 && ftruncate(fd, 300 << 20) == 0)
        close(fd)
        try Self.expectRefused(
            "plist:\(directory.url.path(percentEncoded: false)):suite", saying: "more than the 64 MiB", maxMiB: 100)
    }

    @Test func aDanglingKeyFileSymlinkIsRefusedAtOnceAndLeavesNothing() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let vault = directory.file("v.vault").path(percentEncoded: false)
        let key = directory.file("v.key").path(percentEncoded: false)
        #expect(symlink(directory.file("missing.key").path(percentEncoded: false), key) == 0)
        try Self.expectRefused("vault:\(vault):\(key)", saying: "symbolic link to a missing file", type: "VaultError")
        let left = try FileManager.default.contentsOfDirectory(atPath: directory.url.path(percentEncoded: false))
        #expect(!left.contains { $0.contains(".tmp-") }, "\(left)")
        #expect(!FileManager.default.fileExists(atPath: vault))
    }
}
