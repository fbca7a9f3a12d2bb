import Foundation
import Prefs
import PrefsPostgres

#if canImport(PrefsKeyring)
    import PrefsKeyring
#endif

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The exit statuses of `prefs`, as documented in `prefs --help`.
package enum ExitStatus: Int32, Sendable {
    case success = 0
    /// A domain, key, secret, vault or file that does not exist, or an operation the file system refused.
    case notFound = 1
    /// A command used wrongly: unknown command or option, missing argument, a value that does not parse.
    case usage = 2
    /// A vault that does not authenticate (wrong key or modified file), or a damaged preferences file.
    case integrity = 3
    /// The change was made, but it could not be confirmed durable (syncing the folder failed): do not undo it.
    case notDurable = 4
    /// A write refused because the administrator forced the key's value (managed preferences): nothing changed.
    case forced = 5
}

/// A failure that ends a command: the exit status and a one-line message that says what to do.
struct Failure: Error, Equatable {
    let status: ExitStatus
    let message: String

    init(_ status: ExitStatus, _ message: String) {
        self.status = status
        self.message = message
    }

    static func usage(_ message: String) -> Failure { Failure(.usage, message) }
    static func notFound(_ message: String) -> Failure { Failure(.notFound, message) }

    /// A domain file that cannot be decoded, as the tool says it: what is wrong, that it was left untouched, and the
    /// tool's own way out (`prefs repair DOMAIN`) when the file is a domain of the preferences folder.
    static func damagedFileText(path: String, reason: String) -> String {
        let file = URL(filePath: path)
        let folder = DomainCommands.folder().standardizedFileURL.path(percentEncoded: false)
        let inFolder = file.deletingLastPathComponent().standardizedFileURL.path(percentEncoded: false)
        var text = "\(path) is not a valid preferences file (\(PrefsError.reasonAlone(reason))); left untouched"
        if file.pathExtension == "plist", inFolder.trimmingSuffix("/") == folder.trimmingSuffix("/") {
            let domain = file.deletingPathExtension().lastPathComponent
            text += "; run `prefs repair \(Hints.shellQuoted(domain))` to keep it aside and start the domain afresh"
        }
        return text
    }

    /// The tool's text of a library error where it differs from the library's (which names the library's API).
    static func userText(of error: any Error) -> String? {
        guard case .corruptFile(let path, let reason)? = error as? PrefsError else { return nil }
        return damagedFileText(path: path, reason: reason)
    }

    /// Maps a library error to an exit status, keeping the library's one-line description.
    static func from(_ error: any Error) -> Failure {
        switch error {
        case let failure as Failure:
            return failure
        case let error as PrefsError:
            switch error {
            case .invalidSuiteName, .invalidKey, .typeMismatch, .notAllowed, .encodingFailed, .decodingFailed,
                .invalidAppIdentifier,
                .unidentifiedUserDefaults, .conflictingDeclarations, .ambiguousEnvironmentVariable,
                .separateStandardDomain:
                return Failure(.usage, error.description)
            case .forced:
                return Failure(.forced, error.description)
            case .corruptFile(let path, let reason):
                return Failure(.integrity, damagedFileText(path: path, reason: reason))
            case .io(_, _, let code, _):
                return Failure(.notFound, error.description + (code == EACCES ? "; check the permissions" : ""))
            case .durabilityNotConfirmed:
                return Failure(.notDurable, error.description + "; do not undo it (keep any new key file)")
            case .tooLarge, .damagedFileKeptAside, .configuredAfterUse:
                return Failure(.usage, error.description)
            case .storeClosed, .lockTimedOut:
                return Failure(.notFound, error.description)
            }
        case let error as VaultError:
            switch error {
            case .authenticationFailed:
                return Failure(.integrity, error.description + "; check the key file or passphrase")
            case .io:
                return Failure(.notFound, error.description)
            case .invalidKey:
                return Failure(.integrity, error.description + "; give the kind of key the vault was created with")
            case .unsupportedFormatVersion, .notAVault, .truncated, .insecureKeyFile, .rollbackDetected,
                .rollbackRecordUnavailable:
                return Failure(.integrity, error.description)
            }
        #if canImport(PrefsKeyring)
            case let error as KeyringError:
                switch error {
                case .invalidItem:
                    return Failure(.integrity, error.description)
                case .noSessionBus, .noSecretService, .locked, .unlockDismissed, .timedOut, .noDefaultCollection,
                    .serviceFailed:
                    return Failure(.notFound, error.description)
                }
        #endif
        case let error as CredentialError:
            switch error {
            case .empty, .wrongSize:
                return Failure(.integrity, error.description)
            case .invalidName:
                return Failure(.usage, error.description)
            case .directoryNotSet, .missing, .unreadable, .notRemovable:
                return Failure(.notFound, error.description)
            }
        case let error as PostgresStoreError:
            switch error {
            case .authenticationFailed, .unsupportedSchemaVersion, .damagedSchema:
                return Failure(.integrity, error.description)
            case .invalidConnectionString, .invalidNamespace, .invalidSchema:
                return Failure(.usage, error.description)
            case .unreachable, .connectionRefused, .connectionLost, .serverError, .closed, .timedOut, .outcomeUnknown:
                return Failure(.notFound, error.description)
            }
        default:
            return Failure(.notFound, String(describing: error))
        }
    }
}

extension String {
    fileprivate func trimmingSuffix(_ suffix: String) -> String {
        hasSuffix(suffix) && count > suffix.count ? String(dropLast(suffix.count)) : self
    }
}
