import Foundation
import PrefsTestSupport
import TestThreads
import Testing

/// `scripts/install-deps.sh` (`make deps`), run with stand-ins for `apt-get`, `pkg-config` and `sudo` first on `PATH`:
/// another apt or dpkg holding its lock is waited for, with a message, up to a limit; other failures end it at once.
@Suite(.ownThreads) struct InstallScriptTests {
    /// A folder of stand-in commands: `pkg-config` finds nothing, so the script installs; `apt-get` logs each call
    /// and fails, for its first `lockedCalls` calls, as apt does when another one holds the lock.
    struct StandIns {
        let folder: TempDir
        var log: URL { folder.file("apt-calls") }

        init(lockedCalls: Int, otherFailure: Bool = false) throws {
            folder = try TempDir("prefs-install-deps")
            let failure =
                otherFailure
                ? "echo 'E: Unable to locate package libsodium-dev' >&2; exit 100"
                : """
                if [ "$(wc -l < "\(folder.path)/apt-calls")" -le \(lockedCalls) ]; then
                    echo 'E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 4242 (apt-get)' >&2
                    echo 'E: Unable to acquire the dpkg frontend lock (/var/lib/dpkg/lock-frontend), is another process using it?' >&2
                    exit 100
                fi
                """
            try write(
                "apt-get",
                """
                echo "$*" >> "\(folder.path)/apt-calls"
                \(failure)
                exit 0
                """)
            try write("pkg-config", "exit 1")
            try write("sudo", #"exec "$@""#)
        }

        private func write(_ name: String, _ body: String) throws {
            let file = folder.file(name)
            try ("#!/bin/sh\n" + body + "\n").write(to: file, atomically: true, encoding: .utf8)
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: file.path)
        }

        /// Runs the script with these stand-ins first on `PATH`.
        func run(waitSeconds: Int) throws -> (exit: ChildProcess.Exit, calls: [String]) {
            let script = DocumentationSnippetTests.root.appending(path: "scripts/install-deps.sh")
            let path = folder.path + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
            let exit = try ChildProcess(
                URL(filePath: "/bin/bash"), [script.path(percentEncoded: false)],
                environment: [
                    "PATH": path, "PREFS_APT_WAIT_SECONDS": String(waitSeconds), "PREFS_APT_RETRY_SECONDS": "0",
                ],
                mergingErrors: true, timeLimit: .seconds(60)
            ).wait()
            let calls = (try? String(contentsOf: log, encoding: .utf8))?.split(separator: "\n").map(String.init) ?? []
            return (exit, calls)
        }
    }

    @Test func anotherAptHoldingTheLockIsWaitedForWithAMessage() throws {
        let standIns = try StandIns(lockedCalls: 3)
        defer { standIns.folder.cleanup() }
        let (exit, calls) = try standIns.run(waitSeconds: 600)
        #expect(exit.status == 0, "\(exit.output)")
        #expect(
            exit.output.contains(
                "install-deps: another apt or dpkg is running; waiting for it (at most 600 s): Could not get lock "
                    + "/var/lib/dpkg/lock-frontend. It is held by process 4242 (apt-get)"), "\(exit.output)")
        #expect(exit.output.components(separatedBy: "waiting for it").count == 2, "said once: \(exit.output)")
        // Three refused, then update and install went through.
        #expect(calls.count == 5 && calls[3] == "update -qq" && calls[4].hasPrefix("install -y -qq"), "\(calls)")
    }

    @Test func aLockHeldPastTheLimitEndsTheScriptSayingSo() throws {
        let standIns = try StandIns(lockedCalls: .max)
        defer { standIns.folder.cleanup() }
        let (exit, calls) = try standIns.run(waitSeconds: 0)
        #expect(exit.status != 0)
        #expect(exit.output.contains("another apt or dpkg still holds its lock after 0 s"), "\(exit.output)")
        #expect(calls == ["update -qq"], "nothing installed: \(calls)")
    }

    @Test func anotherFailureEndsTheScriptAtOnce() throws {
        let standIns = try StandIns(lockedCalls: 0, otherFailure: true)
        defer { standIns.folder.cleanup() }
        let (exit, calls) = try standIns.run(waitSeconds: 600)
        #expect(exit.status != 0)
        #expect(exit.output.contains("Unable to locate package") && !exit.output.contains("waiting"), "\(exit.output)")
        #expect(calls.count == 1, "\(calls)")
    }
}
