import Foundation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

/// The names an app written against 0.x uses still do what they did, for one release, with a deprecation warning.
///
/// Each check is a deprecated witness of a requirement that is not deprecated: the old names are used without a
/// warning here (the tests build with warnings as errors), and called through the requirement.
private protocol OldNamesCheck {
    static func run() throws
}

@Suite(.ownThreads)
struct DeprecatedNamesTests {
    private static func check(_ check: any OldNamesCheck.Type) throws { try check.run() }

    @Test func aSecretsServicePrefixesItsKey() throws { try Self.check(ServicePrefix.self) }
}

/// `SecureStoredValue(key:service:store:)` stored the secret under `service.key`.
private enum ServicePrefix: OldNamesCheck {
    @available(*, deprecated)
    static func run() throws {
        let vault = try Vault()
        defer { vault.directory.cleanup() }
        let work = SecureStoredValue<String>(key: "token", service: "work", store: vault.store)
        let plain = SecureStoredValue<String>(key: "token", service: nil, store: vault.store)
        try work.set("w")
        try plain.set("p")
        #expect(work.key == "work.token" && plain.key == "token")
        #expect(try vault.store.allValues() == ["work.token": .string("w"), "token": .string("p")])
    }
}
