public import Foundation

/// Placeholder until the file machinery lands.
public final class UserDefaultsStore: KeyValueStore {
    /// The standard domain.
    public static let standard = UserDefaultsStore()
    /// Feed.
    public let changes = ChangeFeed()
    static func store(for defaults: UserDefaults) -> UserDefaultsStore { standard }
    public func value(forKey key: String) throws -> PrefValue? { nil }
    public func setValue(_ value: PrefValue?, forKey key: String) throws {}
    public func allValues() throws -> [String: PrefValue] { [:] }
}
