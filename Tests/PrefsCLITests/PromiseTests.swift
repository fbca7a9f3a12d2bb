import Foundation
import Prefs
import Synchronization
import Testing

@testable import PrefsCLICore

/// Promises of docs/CLI.md that no other suite checked; docs/PROMISES.md lists every promise.
@Suite struct CLIPromiseTests {
    /// "`prefs delete com.example.backup`: the whole domain (its NAME.lock file stays)".
    @Test func deletingADomainKeepsItsLockFile() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        #expect(try sandbox.prefs("write", "app", "theme", "dark").status == 0)
        #expect(try sandbox.prefs("delete", "app").status == 0)
        #expect(!FileManager.default.fileExists(atPath: sandbox.plist("app").path))
        #expect(FileManager.default.fileExists(atPath: sandbox.config.appending(path: "app.lock").path))
    }

    /// "With neither [`--vault` nor `--app`], the tool's own vault is used (`--app prefs`)."
    @Test func withoutVaultOrAppTheToolsOwnVaultIsUsed() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        #expect(try sandbox.prefs("secure", "init").status == 0)
        #expect(try sandbox.prefs("secure", "set", "token", stdin: "abc\n").status == 0)
        let vault = sandbox.data.appending(path: "prefs/secrets.vault")
        let key = sandbox.config.appending(path: "prefs/secrets.key")
        #expect(try EncryptedFileStore(url: vault, key: .keyFile(key)).value(forKey: "token") == .string("abc"))
        #expect(try sandbox.prefs("secure", "list", "--app", "prefs").output == "token\n")
    }

    /// Exit status 1: "the file system refused the operation" (the preferences folder is a regular file).
    @Test func aFolderTheFileSystemRefusesIsStatus1() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        try Data("not a folder".utf8).write(to: sandbox.config)
        let result = try sandbox.prefs("write", "app", "theme", "dark")
        #expect(result.status == 1 && result.isOneLineFailure, "\(result)")
        #expect(try Data(contentsOf: sandbox.config) == Data("not a folder".utf8))
    }

    /// "`set` reads the value from standard input …, or asks for it without echo when standard input is a
    /// terminal."
    @Test func aSecretIsAskedForWithoutEchoWhenStandardInputIsATerminal() async throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        let vault = ["--vault", sandbox.path("v.vault"), "--key-file", sandbox.path("v.key")]
        #expect(try sandbox.prefs(["secure", "init"] + vault).status == 0)
        let prompts = Mutex<[String]>([])
        let output = Mutex("")
        let console = Console(
            writeOutput: { text in output.withLock { $0 += text } },
            writeData: { data in output.withLock { $0 += String(decoding: data, as: UTF8.self) } },
            writeError: { text in output.withLock { $0 += text } },
            readInput: { _ in Data("from stdin".utf8) },
            inputIsTerminal: true,
            readSecret: { prompt in
                prompts.withLock { $0.append(prompt) }
                return "typed"
            },
            environment: [:])
        #expect(await PrefsTool.run(["secure", "set", "token"] + vault, console: console) == 0)
        #expect(prompts.withLock { $0.count } == 1)
        #expect(!output.withLock { $0 }.contains("typed"))
        let store = try EncryptedFileStore(url: sandbox.file("v.vault"), key: .keyFile(sandbox.file("v.key")))
        #expect(try store.value(forKey: "token") == .string("typed"))
    }
}
