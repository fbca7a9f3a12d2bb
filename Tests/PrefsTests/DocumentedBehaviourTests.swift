import Foundation
import PrefsTestSupport
import Testing

@testable import Prefs

/// Behaviour the documentation promises that no other suite exercised.
struct DocumentedBehaviourTests {
    @Test func unopenableVaultReadsNilReportsAndThrowsOnWrite() throws {
        // What PrefsConfig.secureStore falls back to when the default vault cannot be opened.
        Reports.install()
        let key = uniqueKey("token")
        let failure = VaultError.insecureKeyFile(path: "/tmp/secrets.key", mode: 0o644)
        let unavailable = UnavailableStore(failure)
        @SecureStoredValue<String>(key: key, store: unavailable) var token
        #expect(token == nil)
        #expect(Reports.for(key).contains { ($0.error as? VaultError) == failure && $0.operation == .read })
        #expect(throws: failure) { try $token.set("eyJ") }
        #expect(throws: failure) { try unavailable.allValues() }
    }

    @Test func fileStoreReplaceAllIsOneDurableWrite() async throws {
        let folder = try TempDir()
        defer { folder.cleanup() }
        let store = try FileStore(url: folder.file("settings.json"))
        try store.set(true, for: .doTheThing)
        let observed = store.changes.keys()
        try store.replaceAll(["theme": .string("dark"), "fontSize": .int(16)])
        #expect(try store.allValues() == ["theme": .string("dark"), "fontSize": .int(16)])
        #expect(try store.value(for: .doTheThing) == false)
        let changed = try await first(3, of: observed)
        #expect(Set(changed) == ["doTheThing", "theme", "fontSize"])
        let text = try String(contentsOf: folder.file("settings.json"), encoding: .utf8)
        #expect(text.contains("\"fontSize\"") && !text.contains("doTheThing"))
    }

    @Test func secureUpdateIsAtomicAndSeesNil() throws {
        let folder = try TempDir()
        defer { folder.cleanup() }
        let vault = try EncryptedFileStore(url: folder.file("v.vault"), key: .keyFile(folder.file("v.key")))
        @SecureStoredValue<Int>(key: "refreshCount", store: vault) var refreshCount
        try $refreshCount.update { $0 = ($0 ?? 0) + 1 }
        try $refreshCount.update { $0 = ($0 ?? 0) + 1 }
        #expect(refreshCount == 2)
        try $refreshCount.update { $0 = nil }
        #expect(try vault.allValues().isEmpty)
    }

    @Test func suiteContentsAndDeclaredDefault() throws {
        let folder = try TempDir()
        defer { folder.cleanup() }
        let suite = try UserDefaultsStore(suiteName: "group.example.docs", directory: folder.url)
        @StoredValue(key: "fontScale", store: suite) var fontScale: Double = 1.0
        #expect($fontScale.defaultValue == 1.0)
        fontScale = 1.5
        #expect(try suite.allValues() == ["fontScale": .double(1.5)])
    }

    @Test func conversionsRefuseValuesThatDoNotFitExactly() throws {
        #expect(throws: PrefsError.self) { try Double(prefValue: .int(Int64.max - 1)) }
        #expect(try Double(prefValue: .int(1 << 52)) == 4_503_599_627_370_496)
        #expect(throws: PrefsError.self) { try Float(prefValue: .int((1 << 24) + 1)) }
        #expect(try Float(prefValue: .int(1 << 24)) == 16_777_216)
        #expect(throws: PrefsError.self) { try URL(prefValue: .int(1)) }
        #expect(PrefValue(prefValue: .bool(true)).prefValue == .bool(true))
        #expect(PrefsError.invalidKey("", reason: "empty").localizedDescription.contains("invalid key"))
    }
}
