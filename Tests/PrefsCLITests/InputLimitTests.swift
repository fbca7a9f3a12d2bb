import Foundation
import Prefs
import TestThreads
import Testing

@testable import PrefsCLICore

/// What `prefs` does with standard input it should not take as it is: bytes that are not text, nothing at all, or
/// more than it reads. Each refusal is one line with status 2, and what was stored stays.
@Suite(.ownThreads) struct InputLimitTests {
    struct Vault {
        let sandbox: Sandbox
        var options: [String] { ["--vault", sandbox.path("v.vault"), "--key-file", sandbox.path("v.key")] }

        init() throws {
            sandbox = try Sandbox()
            try #require(sandbox.prefs(["secure", "init"] + options).status == 0)
            try #require(sandbox.prefs(["secure", "set", "token"] + options, stdin: "good\n").status == 0)
        }

        /// The secret as the library reads it from the vault file.
        func stored(_ name: String) throws -> PrefValue? {
            try EncryptedFileStore(url: sandbox.file("v.vault"), key: .keyFile(sandbox.file("v.key")))
                .value(forKey: name)
        }

        /// Runs `prefs secure set NAME` with `bytes` on standard input.
        func set(_ name: String, _ bytes: [UInt8], _ extra: [String] = []) throws -> PrefsResult {
            let file = sandbox.file("input-\(UUID().uuidString)")
            try Data(bytes).write(to: file)
            return try sandbox.prefs(["secure", "set", name] + options + extra, stdinFrom: file.path)
        }
    }

    @Test func invalidUTF8IsRefusedUnlessTheValueIsData() throws {
        let vault = try Vault()
        defer { vault.sandbox.cleanup() }
        let binary: [UInt8] = [0x74, 0x6F, 0xFF, 0xFE, 0x0A]
        let refused = try vault.set("token", binary)
        #expect(refused.status == 2 && refused.isOneLineFailure, "\(refused)")
        #expect(refused.error.contains("not valid UTF-8") && refused.error.contains("--type data"), "\(refused)")
        #expect(try vault.stored("token") == .string("good"), "the secret is not replaced by U+FFFD text")
        // Declared as data, the bytes are stored exactly, trailing newline included.
        let asData = try vault.set("blob", binary, ["--type", "data"])
        #expect(asData.status == 0, "\(asData)")
        #expect(try vault.stored("blob") == .data(Data(binary)))
        // A key stored as data keeps taking bytes without --type.
        try vault.set("blob", [0x00, 0x80]).expectSuccess()
        #expect(try vault.stored("blob") == .data(Data([0x00, 0x80])))
    }

    @Test func anEmptyValueIsRefusedUnlessAllowed() throws {
        let vault = try Vault()
        defer { vault.sandbox.cleanup() }
        for input in [[], [0x0A]] as [[UInt8]] {
            let refused = try vault.set("token", input)
            #expect(refused.status == 2 && refused.isOneLineFailure, "\(refused)")
            #expect(refused.error.contains("--allow-empty"), "\(refused)")
            #expect(try vault.stored("token") == .string("good"))
        }
        #expect(try vault.set("token", [], ["--type", "data"]).status == 2)
        try vault.set("token", [0x0A], ["--allow-empty"]).expectSuccess()
        #expect(try vault.stored("token") == .string(""))
    }

    @Test func anEndlessStandardInputEndsWithAnErrorAndChangesNothing() throws {
        let vault = try Vault()
        defer { vault.sandbox.cleanup() }
        let secret = try vault.sandbox.prefs(["secure", "set", "token"] + vault.options, stdinFrom: "/dev/zero")
        #expect(secret.status == 2 && secret.isOneLineFailure && secret.error.contains("1 MiB"), "\(secret)")
        #expect(try vault.stored("token") == .string("good"))

        let sandbox = vault.sandbox
        try sandbox.prefs("write", "app", "theme", "dark")
        let before = try Data(contentsOf: sandbox.plist("app"))
        for arguments in [["import", "app", "-"], ["import", "app", "/dev/zero"]] {
            let result = try sandbox.prefs(arguments, stdinFrom: "/dev/zero")
            #expect(result.status == 2 && result.isOneLineFailure && result.error.contains("64 MiB"), "\(result)")
            #expect(try Data(contentsOf: sandbox.plist("app")) == before)
        }
    }

    @Test func anImportOneByteOverTheLimitIsRefused() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        var document = Data(#"{"k": "v"}"#.utf8)
        document.append(Data(repeating: 0x20, count: (64 << 20) + 1 - document.count))
        try document.write(to: sandbox.file("over-limit.json"))
        let over = try sandbox.prefs(["import", "app", "-"], stdinFrom: sandbox.path("over-limit.json"))
        #expect(over.status == 2 && over.isOneLineFailure && over.error.contains("standard input"), "\(over)")
        #expect(!FileManager.default.fileExists(atPath: sandbox.plist("app").path))
    }

    @Test func theLimitIsInclusive() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        try Data(repeating: 0x61, count: 10).write(to: sandbox.file("ten"))
        #expect(try BoundedInput.read(path: sandbox.path("ten"), limit: 10).count == 10)
        #expect(throws: Failure.self) { try BoundedInput.read(path: sandbox.path("ten"), limit: 9) }
    }
}
