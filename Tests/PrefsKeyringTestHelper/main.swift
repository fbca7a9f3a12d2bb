// The child process of the keyring tests. It uses the session bus its environment names (the test's own) and
// prints one line per result on standard output: `ok`, a value, or `error <Type>.<case> <milliseconds>: <message>`.
//
//   default-set APP KEY VALUE        @SecureStoredValue through the default vault, its key in the keyring
//   default-get APP KEY              the same, reading; a reported error is printed as `reported …`
//   set VAULT APP KEY VALUE          EncryptedFileStore(url: VAULT, key: .keyring(appIdentifier: APP))
//   get VAULT APP KEY
//   move VAULT APP KEYFILE to-keyring|to-file    moveKey(to:) from the key file to the keyring, or back
//   open-moving VAULT APP KEYFILE KEY            init(url:key:movingFrom:) from the key file, then reads KEY
//   make-key VAULT APP               only what the first step of a move does: the key made in the keyring
//
//   bounds                           the bounds `KeyringKey()` and `.keyring()` keep when given none
//
// PREFS_KEYRING_TIMEOUT_MS bounds each keyring call and, unless PREFS_KEYRING_PROMPT_TIMEOUT_MS says otherwise, the
// unlock prompt; without it the key source keeps its own defaults. PREFS_KEYRING_PROMPTING=0 refuses a locked
// keyring without a prompt. With PREFS_KEYRING_WAIT_FOR_GO set, a command starts once a line arrives on standard
// input, so a test can start several at the same instant.
import Foundation
import Prefs
import PrefsKeyring

func emit(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

let environment = ProcessInfo.processInfo.environment
let timeout = environment["PREFS_KEYRING_TIMEOUT_MS"].flatMap { Int($0) }.map { Duration.milliseconds($0) }
let promptTimeout =
    environment["PREFS_KEYRING_PROMPT_TIMEOUT_MS"].flatMap { Int($0) }.map { Duration.milliseconds($0) } ?? timeout
let prompting = environment["PREFS_KEYRING_PROMPTING"] != "0"

func keyring(_ app: String) -> VaultKey {
    guard let timeout, let promptTimeout else { return .keyring(appIdentifier: app, prompting: prompting) }
    return .keyring(appIdentifier: app, prompting: prompting, timeout: timeout, promptTimeout: promptTimeout)
}

/// `KeyringError.locked`, `VaultError.authenticationFailed`, …: what the tests compare.
func caseName(_ error: any Error) -> String {
    let label = Mirror(reflecting: error).children.first?.label
    switch error {
    case let error as KeyringError:
        if case .noDefaultCollection = error { return "KeyringError.noDefaultCollection" }
        return "KeyringError." + (label ?? "?")
    case let error as VaultError:
        if case .authenticationFailed = error { return "VaultError.authenticationFailed" }
        return "VaultError." + (label ?? "?")
    default:
        return "\(type(of: error))." + (label ?? "?")
    }
}

/// Runs `body`, printing `error <case> <milliseconds>: <message>` when it throws.
func attempt(_ body: () throws -> Void) {
    let started = ContinuousClock.now
    do {
        try body()
    } catch {
        let elapsed = ContinuousClock.now - started
        let milliseconds = elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000
        emit("error \(caseName(error)) \(milliseconds): \(error)")
    }
}

let arguments = Array(CommandLine.arguments.dropFirst())
if environment["PREFS_KEYRING_WAIT_FOR_GO"] != nil { _ = readLine() }
PrefsConfig.errorHandler = { report in emit("reported \(caseName(report.error)): \(report.error)") }

switch arguments.first {
case "default-set":
    PrefsConfig.configure(PrefsConfiguration(appIdentifier: arguments[1], secureStoreKey: keyring(arguments[1])))
    let secret = SecureStoredValue<String>(key: arguments[2])
    attempt {
        try secret.set(arguments[3])
        emit("ok")
    }
case "default-get":
    PrefsConfig.configure(PrefsConfiguration(appIdentifier: arguments[1], secureStoreKey: keyring(arguments[1])))
    emit(SecureStoredValue<String>(key: arguments[2]).wrappedValue ?? "nil")
case "set":
    attempt {
        let store = try EncryptedFileStore(url: URL(filePath: arguments[1]), key: keyring(arguments[2]))
        try store.setValue(.string(arguments[4]), forKey: arguments[3])
        emit("ok")
    }
case "get":
    attempt {
        let store = try EncryptedFileStore(url: URL(filePath: arguments[1]), key: keyring(arguments[2]))
        emit(try store.value(forKey: arguments[3]).map { "\($0)" } ?? "nil")
    }
case "move":
    attempt {
        let vault = URL(filePath: arguments[1])
        let keyFile = VaultKey.keyFile(URL(filePath: arguments[3]))
        let toKeyring = arguments[4] == "to-keyring"
        let store = try EncryptedFileStore(url: vault, key: toKeyring ? keyFile : keyring(arguments[2]))
        try store.moveKey(to: toKeyring ? keyring(arguments[2]) : keyFile)
        emit("ok")
    }
case "open-moving":
    attempt {
        let store = try EncryptedFileStore(
            url: URL(filePath: arguments[1]), key: keyring(arguments[2]),
            movingFrom: .keyFile(URL(filePath: arguments[3])))
        emit(try store.value(forKey: arguments[4]).map { "\($0)" } ?? "nil")
    }
case "make-key":
    attempt {
        let app = arguments[2]
        let key = timeout.map { KeyringKey(appIdentifier: app, timeout: $0) } ?? KeyringKey(appIdentifier: app)
        _ = try key.key(forVault: URL(filePath: arguments[1]), creating: true)
        emit("ok")
    }
case "bounds":
    let source = KeyringKey()
    emit("KeyringKey() \(source.timeout) \(source.promptTimeout)")
    if case .source(let keyring as KeyringKey) = VaultKey.keyring() {
        emit(".keyring() \(keyring.timeout) \(keyring.promptTimeout)")
    }
default:
    FileHandle.standardError.write(Data("unknown command \(arguments)\n".utf8))
    exit(2)
}
