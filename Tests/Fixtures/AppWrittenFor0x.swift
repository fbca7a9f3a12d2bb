// An app written against Prefs 0.x (be694bd), with the names 1.0 renamed. `DocumentationSnippetTests` ›
// `anAppWrittenFor0xBuildsWithDeprecationWarningsOnly` type-checks it against this checkout: it must build, and every
// warning must be a deprecation. Not part of any target.

import Foundation
import Observation
import Prefs

enum Theme: String, Codable, Sendable, CaseIterable { case light, dark, system }

struct Account: Codable, Sendable, Equatable {
    var name: String
    var plan = "free"
}

extension PrefKey where Value == Int {
    static let fontSize = PrefKey("fontSize", default: 14)
}

@Observable
final class Settings {
    @ObservationIgnored @StoredValue(key: "theme") var theme: Theme = .light
    @ObservationIgnored @StoredValue(.fontSize) var fontSize
    @ObservationIgnored @StoredValue(key: "tags") var tags: [String] = []
    @ObservationIgnored @StoredValue(key: "account") var account: Account? = nil
    @ObservationIgnored @StoredValue(key: "lastOpened") var lastOpened: Date?
    @ObservationIgnored @StoredValue(key: "volume", storage: UserDefaults(suiteName: "group.example")!) var volume = 0.5
    @ObservationIgnored @SecureStoredValue<String>(key: "token", service: "api.example.com") var token
}

func configureAtLaunch() {
    PrefsConfig.appIdentifier = "com.example.old"
    PrefsConfig.environmentPrefix = "OLD_"
    PrefsConfig.secureStoreKey = .credential("vault-key")
    PrefsConfig.damagedStandardDomain = .refuse
    print(PrefsConfig.appIdentifier)
}

func useTheOldNames(settings: Settings) async throws {
    let suite: UserDefaultsStore = try UserDefaultsStore(suiteName: "com.example.app")
    let standard = UserDefaultsStore.standard
    let bridge = FoundationUserDefaultsStore(.standard)
    bridge.checkForChanges()
    try settings.$token.remove()
    for await key in suite.changes.keys(["theme"]) {
        print(key)
        break
    }
    for await damage in standard.damageUpdates() {
        print(damage as Any)
        break
    }
    print(standard.values(in: .managed), PrefValue.integer(UInt64.max))
    PrefsConfig.errorHandler = { report in
        if let moved = report.error as? PrefsMigrated { print(moved.oldKey) }
        if let isolation = report.error as? PrefsNotIsolated { print(isolation.path) }
    }
    settings.$tags.append("swift")
    settings.$theme.reset()
    for await theme in settings.$theme.values {
        print(theme)
        break
    }
    try standard.batch { settings.fontSize = 16 }
    let quick = standard.deferringWrites()
    try await quick.flush()
}
