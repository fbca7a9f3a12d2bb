/// Stands in for a store that could not be opened (for example the default vault with a wrong key file): every
/// operation throws the error that prevented opening, so wrappers read their defaults and report it, and writes
/// fail loudly instead of going somewhere else.
final class UnavailableStore: KeyValueStore {
    let error: any Error
    let changes = ChangeFeed()

    init(_ error: any Error) { self.error = error }

    func value(forKey key: String) throws -> PrefValue? { throw error }
    func setValue(_ value: PrefValue?, forKey key: String) throws { throw error }
    func allValues() throws -> [String: PrefValue] { throw error }
}
