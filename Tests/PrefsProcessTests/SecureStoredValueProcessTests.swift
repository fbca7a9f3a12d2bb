import Foundation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

/// Secrets written by child processes: two at once lose neither, and the default vault's place and permissions.
@Suite(.ownThreads)
struct SecureStoredValueProcessTests {
    @Test func twoProcessesSettingDifferentSecretsLoseNeither() async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let spec = Backend.vault.spec(in: directory)
        _ = try ChildProcess.run(["set-string", spec, "init", "x"])  // creates the key file first
        let children = try (0..<2).map { try ChildProcess.start(["set-string", spec, "secret\($0)", "value\($0)"]) }
        for child in children { _ = child.wait() }
        let store = try Backend.vault.open(in: directory)
        #expect(try store.value(forKey: "secret0") == .string("value0"))
        #expect(try store.value(forKey: "secret1") == .string("value1"))
    }

    @Test func theDefaultVaultLivesInTheXDGFoldersWithPrivatePermissions() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let environment = [
            "XDG_DATA_HOME": directory.file("data").path, "XDG_CONFIG_HOME": directory.file("config").path,
        ]
        let result = try ChildProcess.run(["default-secure-set", "authToken", "tok"], environment: environment)
        #expect(result.lines == ["tok"], "\(result.error)")
        let manager = FileManager.default
        func mode(_ path: String) throws -> Int? {
            try manager.attributesOfItem(atPath: directory.file(path).path)[.posixPermissions] as? Int
        }
        #expect(try mode("data/com.example.helper/secrets.vault") == 0o600)
        #expect(try mode("data/com.example.helper") == 0o700)
        #expect(try mode("config/com.example.helper/secrets.key") == 0o600)
        #expect(try mode("config/com.example.helper") == 0o700)
    }

    @Test func readingASecretBeforeAnyIsWrittenCreatesNoFolder() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let environment = [
            "XDG_DATA_HOME": directory.file("data").path, "XDG_CONFIG_HOME": directory.file("config").path,
            "XDG_STATE_HOME": directory.file("state").path,
        ]
        let result = try ChildProcess.run(["default-secure-get", "authToken"], environment: environment)
        #expect(result.lines == ["nil"], "\(result.error)")
        #expect(try directory.contents() == [])
    }
}
