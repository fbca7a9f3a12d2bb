import Foundation
import PrefsTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `let session = try SecretServiceSession()` is a D-Bus session bus of the test's own with GNOME Keyring on it,
/// for one test; `session.stop()` ends both and removes every file they made.
///
/// The bus (`dbus-daemon` as a child of the test, with a configuration that knows only this session's services)
/// listens in the session's own folder. GNOME Keyring is started by D-Bus activation when the first client asks
/// for the Secret Service, as on a desktop, so no client can ask before it is there; its login keyring is created
/// and unlocked with a random password of the session's, and its files go to the session's `XDG_DATA_HOME`.
/// Children get an environment that names only the session's folders and bus: no `DISPLAY`, nothing of a real
/// desktop session, so no test ever reaches a real user's keyring. With `secretService: false` the bus has no
/// Secret Service at all.
final class SecretServiceSession: @unchecked Sendable {
    // @unchecked Sendable: everything is set in init; `bus` is itself thread-safe.
    let folder: TempDir
    /// The bus address children are given.
    let address: String
    private let bus: ChildProcess

    var data: URL { folder.file("data") }
    var config: URL { folder.file("config") }
    var state: URL { folder.file("state") }
    var runtime: URL { folder.file("run") }

    /// With `unansweredPrompts`, the keyring's unlock prompt is shown by nobody: the prompter the keyring asks the
    /// bus to start connects and never answers, as a prompt left open on a desktop.
    init(secretService: Bool = true, unansweredPrompts: Bool = false) throws {
        folder = try TempDir("prefs-keyring")
        try folder.createFolders(["data", "config", "state", "home", "run", "services"])
        chmod(folder.path("run"), 0o700)
        if secretService { try Self.writeKeyringService(in: folder) }
        if unansweredPrompts { try Self.writeSilentPrompter(in: folder) }
        try """
        <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
        <busconfig>
          <type>session</type>
          <listen>unix:dir=\(folder.path("run"))</listen>
          <auth>EXTERNAL</auth>
          <servicedir>\(folder.path("services"))</servicedir>
          <policy context="default">
            <allow send_destination="*" eavesdrop="true"/>
            <allow eavesdrop="true"/>
            <allow own="*"/>
          </policy>
        </busconfig>

        """.write(to: folder.file("bus.conf"), atomically: true, encoding: .utf8)
        let environment = Self.childEnvironment(folder: folder, address: nil)
        bus = try ChildProcess(
            try Self.executable("dbus-daemon"),
            ["--config-file=\(folder.path("bus.conf"))", "--nofork", "--print-address=1"],
            environment: environment, inheritingEnvironment: false, timeLimit: .seconds(300))
        // dbus-daemon prints its address once it listens.
        guard let address = bus.readLine(), address.hasPrefix("unix:") else {
            bus.kill()
            folder.cleanup()
            throw SessionError("dbus-daemon did not start: \(bus.wait())")
        }
        self.address = address
    }

    /// How the bus starts GNOME Keyring when a client asks for the Secret Service: unlocking the login keyring with
    /// the session's password (made and kept unlocked, as a desktop login does), or, once the session's `locked`
    /// file exists, without it, as D-Bus activation restarts a keyring daemon that was killed: the login keyring is
    /// then there, but locked. (One service file that looks at the marker: dbus-daemon may keep a service file it
    /// read within the same second.)
    private static func writeKeyringService(in folder: TempDir) throws {
        let daemon = try executable("gnome-keyring-daemon").path(percentEncoded: false)
        let marker = folder.path("locked")
        try """
        [D-BUS Service]
        Name=org.freedesktop.secrets
        Exec=/bin/sh -c "if [ -e \(marker) ]; then exec \(daemon) --foreground --components=secrets; else printf %s \(UUID().uuidString) | exec \(daemon) --foreground --unlock --components=secrets; fi"

        """.write(to: folder.file("services/org.freedesktop.secrets.service"), atomically: true, encoding: .utf8)
    }

    /// The prompters GNOME Keyring asks for, started by the bus as a client that listens and never takes the
    /// prompter's name (it ends with the bus): the keyring's prompt then waits until the bus gives up starting it.
    private static func writeSilentPrompter(in folder: TempDir) throws {
        let monitor = try executable("dbus-monitor").path(percentEncoded: false)
        for name in ["org.gnome.keyring.SystemPrompter", "org.gnome.keyring.PrivatePrompter"] {
            try """
            [D-BUS Service]
            Name=\(name)
            Exec=\(monitor) --session

            """.write(to: folder.file("services/\(name).service"), atomically: true, encoding: .utf8)
        }
    }

    /// Kills the keyring daemon and lets the bus start it again at the next client's request, without unlocking:
    /// the keyring's items are all still there, in a locked login keyring.
    func restartKeyringLocked() throws {
        let daemon = try #require(keyringDaemon(), "the keyring daemon is not running")
        try Data().write(to: folder.file("locked"))
        kill(daemon, SIGKILL)
        // Hang guard only: the bus releases the name as soon as it sees the connection close.
        let deadline = ContinuousClock.now + .seconds(20)
        while keyringDaemon() != nil {
            guard ContinuousClock.now < deadline else { throw SessionError("the killed keyring daemon kept its name") }
        }
    }

    /// Ends the keyring daemon (if it was started), then the bus, and removes the session's folder.
    func stop() {
        if let daemon = keyringDaemon() { kill(daemon, SIGKILL) }
        bus.kill()
        folder.cleanup()
    }

    /// The environment of the session's children: its folders and bus, the `PATH`, and coverage's profile file.
    var environment: [String: String] { Self.childEnvironment(folder: folder, address: address) }

    private static func childEnvironment(folder: TempDir, address: String?) -> [String: String] {
        let inherited = ProcessInfo.processInfo.environment
        var environment = [
            "HOME": folder.path("home"), "XDG_DATA_HOME": folder.path("data"),
            "XDG_CONFIG_HOME": folder.path("config"), "XDG_STATE_HOME": folder.path("state"),
            "XDG_RUNTIME_DIR": folder.path("run"), "PATH": inherited["PATH"] ?? "/usr/bin:/bin",
        ]
        if let address { environment["DBUS_SESSION_BUS_ADDRESS"] = address }
        if let profile = inherited["LLVM_PROFILE_FILE"] { environment["LLVM_PROFILE_FILE"] = profile }
        return environment
    }

    // MARK: Children

    /// Starts `PrefsKeyringTestHelper` on this session, with `extra` added to its environment.
    func startHelper(_ arguments: [String], environment extra: [String: String] = [:]) throws -> ChildProcess {
        try ChildProcess(
            Self.helper, arguments, environment: environment.merging(extra) { $1 }, inheritingEnvironment: false,
            input: .pipe, timeLimit: .seconds(60))
    }

    /// Runs `PrefsKeyringTestHelper` to completion and returns the lines it printed.
    func helper(_ arguments: [String], environment extra: [String: String] = [:]) throws -> [String] {
        let child = try startHelper(arguments, environment: extra)
        child.closeInput()
        let exit = child.wait()
        #expect(exit.succeeded && !exit.timedOut, "\(arguments): \(exit)")
        return exit.lines
    }

    /// Runs `prefs` on this session.
    func prefs(_ arguments: [String], stdin: String? = nil, environment extra: [String: String] = [:]) throws
        -> ChildProcess.Exit
    {
        try ChildProcess.run(
            builtExecutable(named: "prefs"), arguments, environment: environment.merging(extra) { $1 },
            inheritingEnvironment: false, input: stdin.map { .text($0) } ?? .none, timeLimit: .seconds(60))
    }

    /// Runs `secret-tool` (libsecret's own command-line tool) on this session: what a person would see.
    func secretTool(_ arguments: [String], stdin: String? = nil) throws -> ChildProcess.Exit {
        try ChildProcess.run(
            try Self.executable("secret-tool"), arguments, environment: environment, inheritingEnvironment: false,
            input: stdin.map { .text($0) } ?? .none, timeLimit: .seconds(30))
    }

    /// The items `secret-tool search --all` lists for these attributes, as its `[/path]` lines.
    func items(_ attributes: [String]) throws -> [String] {
        let exit = try secretTool(["search", "--all"] + attributes)
        return (exit.output + exit.error).split(separator: "\n").map(String.init).filter { $0.hasPrefix("[/") }
    }

    /// Locks the default collection, as the keyring's lock button does.
    func lockKeyring() throws {
        let exit = try busCall([
            "--dest=org.freedesktop.secrets", "/org/freedesktop/secrets", "org.freedesktop.Secret.Service.Lock",
            "array:objpath:/org/freedesktop/secrets/aliases/default",
        ])
        #expect(exit.succeeded, "\(exit)")
    }

    /// The process id of the keyring daemon, once it has been started on the bus.
    func keyringDaemon() -> pid_t? {
        let exit = try? busCall([
            "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus.GetConnectionUnixProcessID",
            "string:org.freedesktop.secrets",
        ])
        guard let exit, exit.succeeded, let word = exit.output.split(separator: " ").last else { return nil }
        return pid_t(word.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Sends `signal` to the bus daemon (SIGSTOP to wedge it, SIGCONT to resume it).
    func signalBus(_ signal: Int32) { bus.signal(signal) }

    private func busCall(_ arguments: [String]) throws -> ChildProcess.Exit {
        try ChildProcess.run(
            try Self.executable("dbus-send"), ["--session", "--print-reply"] + arguments, environment: environment,
            inheritingEnvironment: false, timeLimit: .seconds(30))
    }

    static let helper = builtExecutable(named: "PrefsKeyringTestHelper")

    /// `name` on the `PATH` (scripts/install-deps.sh installs them).
    static func executable(_ name: String) throws -> URL {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for folder in path.split(separator: ":") + ["/usr/bin", "/usr/sbin"] {
            let candidate = "\(folder)/\(name)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return URL(filePath: candidate) }
        }
        throw SessionError("\(name) is not installed; run scripts/install-deps.sh")
    }
}

struct SessionError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// `error KeyringError.locked 12: …` as the helper prints it: the error's case and how long it took.
struct HelperFailure {
    let name: String
    let milliseconds: Int
    let message: String

    init?(_ line: String?) {
        guard let line, line.hasPrefix("error ") else { return nil }
        let parts = line.dropFirst(6).split(separator: " ", maxSplits: 2)
        guard parts.count == 3, let milliseconds = Int(parts[1].dropLast(parts[1].hasSuffix(":") ? 1 : 0)) else {
            return nil
        }
        name = String(parts[0])
        self.milliseconds = milliseconds
        message = String(parts[2])
    }
}
