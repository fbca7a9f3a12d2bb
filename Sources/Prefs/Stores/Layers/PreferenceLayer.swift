/// `store.layer(ofKey: "volume")` says which layer a key's effective value comes from: `.managed`, `.arguments`, …
///
/// A store resolves each key through these layers, strongest first, and the first layer that holds the key wins.
/// Every write goes to ``user``; the other layers are read-only. See <doc:LayeredPreferences> for which stores get
/// which layers and where each layer's values come from.
public enum PreferenceLayer: String, Sendable, CaseIterable, Comparable {
    /// `.managed`: a value forced in `/etc/xdg/managed-preferences/<domain>.plist`, a file that root owns in folders
    /// that root owns, none writable by group or others; never from a folder the environment names. Writes of a
    /// forced key throw ``PrefsError/forced(key:)``.
    case managed
    /// `.arguments`: a `-key value` pair on the command line, for this run only.
    case arguments
    /// `.environment`: a `PREFIX_KEY=value` environment variable, for this run only, once a prefix is chosen.
    case environment
    /// `.user`: the user's own value, the one the store keeps. Every write goes here.
    case user
    /// `.systemDefaults`: a default shipped system-wide in `<dir>/<domain>.plist` (or
    /// `<dir>/managed-preferences/<domain>.plist`) under a folder of `$XDG_CONFIG_DIRS`.
    case systemDefaults
    /// `.registered`: a default registered for this process, by `store.register(defaults:)` or by a declaration
    /// such as `@StoredValue(key: "zoom") var zoom = 1.0`.
    case registered

    /// `layer < .user` is true for the layers that override the user's own values.
    public static func < (lhs: PreferenceLayer, rhs: PreferenceLayer) -> Bool { lhs.order < rhs.order }

    /// The layer's place, strongest first: its index in `allCases` and in ``LayerStack``'s slots.
    var order: Int {
        switch self {
        case .managed: 0
        case .arguments: 1
        case .environment: 2
        case .user: 3
        case .systemDefaults: 4
        case .registered: 5
        }
    }

    /// The layers by ``order``.
    static let byOrder: [PreferenceLayer] = allCases

    /// `layer.isForced` is true for ``managed``: the app's writes of the key throw and the value comes from a file
    /// only root can change. It stops this app's writes, not a user who runs other code (see <doc:LayeredPreferences>).
    public var isForced: Bool { self == .managed }

    /// `layer.isText` is true for the layers whose values arrive as text and are converted to the declared type.
    var isText: Bool { self == .arguments || self == .environment }
}
