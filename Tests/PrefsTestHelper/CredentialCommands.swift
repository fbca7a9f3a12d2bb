import Foundation
import Prefs

/// Commands for ServiceCredentialProcessTests: the default vault with its key in a systemd service credential,
/// found through this process's own `$CREDENTIALS_DIRECTORY`.
enum CredentialCommands {
    static func run(_ arguments: [String]) -> Bool {
        switch arguments.first {
        case "credential-default":
            // credential-default NAME KEY [VALUE]: the default vault keyed by credential NAME; sets KEY to VALUE
            // when given, then prints KEY's value (or nil) after any report.
            PrefsConfig.errorHandler = { report in emit("reported \(type(of: report.error)): \(report.error)") }
            PrefsConfig.configure(
                PrefsConfiguration(appIdentifier: "com.example.helper", secureStoreKey: .credential(arguments[1])))
            let secret = SecureStoredValue<String>(key: arguments[2])
            if arguments.count > 3 {
                do { try secret.set(arguments[3]) } catch { emit("error \(type(of: error)): \(error)") }
            }
            emit(secret.wrappedValue ?? "nil")
        case "secure-store-key-late":
            // secure-store-key-late: opens the default vault, then configures its key: refused and reported.
            PrefsConfig.errorHandler = { report in emit("reported \(type(of: report.error)): \(report.error)") }
            PrefsConfig.configure(PrefsConfiguration(appIdentifier: "com.example.helper"))
            emit(SecureStoredValue<String>(key: "token").wrappedValue ?? "nil")
            PrefsConfig.configure(
                PrefsConfiguration(appIdentifier: "com.example.helper", secureStoreKey: .credential("vault-key")))
            emit(PrefsConfig.configuration.secureStoreKey == nil ? "unchanged" : "changed")
        default:
            return false
        }
        return true
    }
}
