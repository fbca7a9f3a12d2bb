public import Foundation

/// `store.addLayer(.arguments)`: a source of values a store can add to its layers (see <doc:LayeredPreferences>).
public enum LayerSource: Sendable, Hashable {
    /// `.arguments`: `-key value` pairs of this process's command line, read as Foundation's UserDefaults reads them.
    case arguments
    /// `.environment(prefix: "MYAPP_")`: environment variables for the store's registered keys, `fontSize` read from
    /// `MYAPP_FONT_SIZE`.
    case environment(prefix: String)
    /// `.systemFiles(domain: "com.example.app")`: system-wide defaults from `<dir>/<domain>.plist` (and
    /// `<dir>/managed-preferences/<domain>.plist`, a default too) for each folder of `$XDG_CONFIG_DIRS` (or `folders`
    /// when given), the first folder most important; and forced values from
    /// `/etc/xdg/managed-preferences/<domain>.plist` only, when root owns it and every folder above it and only root
    /// can write them (see <doc:LayeredPreferences>).
    case systemFiles(domain: String, folders: [URL]? = nil)
}
