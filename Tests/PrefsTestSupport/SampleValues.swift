public import Prefs

/// The values the tests and the documentation samples store: an enum, a Codable struct, a pair of secrets.
public enum Theme: String, Codable, Sendable, Equatable, CaseIterable {
    case light, dark, system
}

/// A Codable struct of preferences, stored as one value.
public struct UserPreferences: Codable, Sendable, Equatable {
    public var hasHapticsEnabled = true
    public var prefersDarkMode = false
    public var fontScale = 1.0

    public init(hasHapticsEnabled: Bool = true, prefersDarkMode: Bool = false, fontScale: Double = 1.0) {
        self.hasHapticsEnabled = hasHapticsEnabled
        self.prefersDarkMode = prefersDarkMode
        self.fontScale = fontScale
    }
}

/// A Codable secret of two tokens.
public struct Credentials: Codable, Sendable, Equatable {
    public var accessToken: String
    public var refreshToken: String

    public init(accessToken: String, refreshToken: String) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
    }
}

extension PrefKey where Value == Bool {
    /// The typed key of the documentation's first example.
    public static let doTheThing = PrefKey("doTheThing", default: false)
}
