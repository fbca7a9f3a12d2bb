import Foundation
import Prefs
import TestThreads
import Testing

@testable import PrefsCLICore

#if canImport(Glibc)
    import Glibc
#endif

/// What `prefs secure` does to the process it runs in so that secrets do not leak from it: no core dumps, and the
/// terminal left as it was when the passphrase prompt is killed.
@Suite(.ownThreads) struct ProcessProtectionTests {
    @Test func secureCommandsMakeTheProcessNotDumpable() async throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        Prctl.call(Prctl.setDumpable, 1)
        defer { Prctl.call(Prctl.setDumpable, 1) }
        #expect(Prctl.call(Prctl.getDumpable, 0) == 1)
        let captured = CapturedConsole()
        let status = await PrefsTool.run(
            ["secure", "list", "--vault", sandbox.path("none.vault"), "--key-file", sandbox.path("k")],
            console: captured.console)
        #expect(status == ExitStatus.notFound.rawValue)
        #expect(Prctl.call(Prctl.getDumpable, 0) == 0)
        var limit = rlimit()
        getrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &limit)
        #expect(limit.rlim_cur == 0)
    }

    /// Runs `prefs` on a new pseudo-terminal, under a shell that is the terminal's session leader (as in a real
    /// terminal: when a session leader dies, Linux hangs the terminal up and resets its settings, which would hide
    /// the bug). Waits until the passphrase prompt has turned echo off, sends `signal` to `prefs`, and checks that
    /// echo is back on and that `prefs` died of that signal.
    @Test(arguments: [SIGTERM, SIGHUP, SIGQUIT, SIGINT])
    func killingThePassphrasePromptRestoresTheTerminal(signal: Int32) throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        let vault = sandbox.path("p.vault")
        #expect(FileManager.default.createFile(atPath: vault, contents: Data("PREFSVLT".utf8)))

        // posix_openpt, unlockpt and ptsname, spelled as the Linux calls they are (Swift's Glibc lacks them).
        let master = open("/dev/ptmx", O_RDWR | O_NOCTTY)
        #expect(master >= 0)
        defer { close(master) }
        var unlock: Int32 = 0  // TIOCSPTLCK and TIOCGPTN below
        var number: UInt32 = 0
        #expect(ioctl(master, 0x4004_5431, &unlock) == 0 && ioctl(master, 0x8004_5430, &number) == 0)
        let slave = "/dev/pts/\(number)"
        let held = open(slave, O_RDWR | O_NOCTTY)
        #expect(held >= 0)
        defer { close(held) }

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // A new session, default signal actions and no blocked signals, as a shell in a new terminal has (the test
        // runner may ignore SIGCHLD or block signals, which the shell would inherit).
        posix_spawnattr_setflags(&attributes, 0x80 | 0x04 | 0x08)  // POSIX_SPAWN_SETSID | SETSIGDEF | SETSIGMASK
        var all = sigset_t()
        var none = sigset_t()
        sigfillset(&all)
        sigemptyset(&none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setsigmask(&attributes, &none)
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // Opened by the new session's leader without O_NOCTTY: it becomes the controlling terminal.
        for fd in [Int32(0), 1, 2] { posix_spawn_file_actions_addopen(&actions, fd, slave, O_RDWR, 0) }
        let pidFile = sandbox.path("pid")
        let statusFile = sandbox.path("status")
        let script = "\"$@\" & echo $! > \(pidFile); wait $!; echo $? > \(statusFile); read line"
        let arguments = [
            "/bin/sh", "-c", script, "sh", PrefsProcess.binary.path(percentEncoded: false), "secure", "list",
            "--vault", vault,
        ]
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        let environment = ProcessInfo.processInfo.environment.merging(sandbox.environment) { $1 }
        var envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in envp { free(pointer) } }
        var shell: pid_t = 0
        #expect(posix_spawn(&shell, arguments[0], &actions, &attributes, &argv, &envp) == 0)
        defer {
            kill(shell, SIGKILL)
            var ignored: Int32 = 0
            waitpid(shell, &ignored, 0)
        }
        // Drain what `prefs` writes (the prompt) so it never blocks on a full terminal buffer.
        let drain = Thread {
            var buffer = [UInt8](repeating: 0, count: 256)
            while read(master, &buffer, buffer.count) > 0 {}
        }
        drain.start()

        func echoIsOn() -> Bool {
            var settings = termios()
            return tcgetattr(held, &settings) == 0 && settings.c_lflag & tcflag_t(ECHO) != 0
        }
        func contents(_ path: String) -> String? {
            (try? String(contentsOfFile: path, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let deadline = ContinuousClock.now + .seconds(20)
        while echoIsOn() || contents(pidFile).flatMap({ pid_t($0) }) == nil, ContinuousClock.now < deadline {
            usleep(5_000)
        }
        let prefs = try #require(contents(pidFile).flatMap { pid_t($0) }, "prefs never started")
        #expect(!echoIsOn(), "the prompt never turned echo off")

        kill(prefs, signal)
        while contents(statusFile)?.isEmpty != false, ContinuousClock.now < deadline { usleep(5_000) }
        // The shell reports 128 + the signal: prefs died of the signal itself (re-raised, as readpassphrase(3)
        // does), and echo is on again while the terminal's session goes on.
        #expect(contents(statusFile) == String(128 + signal))
        #expect(echoIsOn(), "echo left off after signal \(signal)")
    }
}
