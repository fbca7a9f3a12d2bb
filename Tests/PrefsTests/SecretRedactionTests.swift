import Foundation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

private enum Tier: String, Codable, Sendable, Equatable { case free, gold }
private struct APICredentials: Codable, Sendable, Equatable { var token: String }

/// No error text or report shows a stored secret, even one that does not decode as the type asked for.
@Suite(.ownThreads) struct SecretRedactionTests {
    static let secret = "sk_live_4f9aXq81Recognisable"

    @Test func aStoredSecretThatDoesNotDecodeNeverAppearsInErrors() throws {
        Reports.install()
        let vault = try Vault()
        defer { vault.directory.cleanup() }
        let tierKey = uniqueKey("tier")
        let credentialsKey = uniqueKey("credentials")
        try vault.store.setValue(.string(Self.secret), forKey: tierKey)
        try vault.store.setValue(.string("{\"token\": \(Self.secret)}"), forKey: credentialsKey)

        let tier = SecureStoredValue<Tier>(key: tierKey, store: vault.store)
        #expect(tier.wrappedValue == nil)
        let tierError = #expect(throws: PrefsError.self) { try tier.update { $0 = .gold } }
        let credentials = SecureStoredValue<APICredentials>(key: credentialsKey, store: vault.store)
        #expect(credentials.wrappedValue == nil)
        let credentialsError = #expect(throws: PrefsError.self) { try credentials.set(\.token, to: "x") }

        let texts =
            [tierError, credentialsError].map { String(describing: $0) + ($0?.localizedDescription ?? "") }
            + (Reports.for(tierKey) + Reports.for(credentialsKey)).map { "\($0) \($0.error)" }
        #expect(texts.count == 4)
        for text in texts {
            #expect(!text.contains("sk_live"), "\(text)")
            #expect(text.contains("string"), "\(text)")  // still says what was found
        }
        // The secret is still stored: nothing was overwritten.
        #expect(try vault.store.value(forKey: tierKey) == .string(Self.secret))
    }
}
