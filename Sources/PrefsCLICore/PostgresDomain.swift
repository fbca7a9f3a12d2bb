import Foundation
import Prefs
import PrefsPostgres

/// `--postgres-env VAR`: the domain commands on a namespace of a ``PostgresStore`` instead of a UserDefaults suite.
enum PostgresDomain {
    static let option = Option.value(
        "--postgres-env", "VAR",
        "use the PostgreSQL database whose connection string is in environment variable VAR; DOMAIN is the namespace")

    /// Whether the command was given `--postgres-env`.
    static func isRequested(_ invocation: Invocation) -> Bool { invocation["--postgres-env"] != nil }

    /// Opens the namespace; the connection string comes from the environment, never from the command line.
    ///
    /// `prefs watch` waits for others' changes: it listens where it can and polls through a pooler in transaction
    /// mode (``PostgresStore/ChangeSource/automatic``). Every other command reads or writes once and ends, so it
    /// neither listens nor checks whether it could (a check that, through such a pooler, would cost its bound).
    static func open(_ namespace: String, _ invocation: Invocation) throws -> PostgresStore {
        try PostgresStore(
            connection: connectionString(invocation), namespace: namespace,
            changeSource: invocation.command == "prefs watch" ? .automatic : .poll(every: .seconds(3_600)))
    }

    /// The namespaces of the database that hold at least one key, for `prefs domains --postgres-env VAR`.
    static func namespaces(_ invocation: Invocation) throws -> [String] {
        try PostgresStore.namespaces(connection: connectionString(invocation))
    }

    /// The connection string, from the environment variable `--postgres-env` names (never from the command line).
    private static func connectionString(_ invocation: Invocation) throws -> String {
        let variable = invocation["--postgres-env"]!
        guard let connection = invocation.console.environment[variable], !connection.isEmpty else {
            throw Failure.usage(
                "\(invocation.command): environment variable \(variable) is not set or empty; "
                    + "export the connection string in it first, e.g. \(variable)='postgresql:///app?host=/run/postgresql'"
            )
        }
        return connection
    }

    /// Opens a namespace that must hold at least one key (a namespace exists once it has keys).
    static func openExisting(_ namespace: String, _ invocation: Invocation) throws -> PostgresStore {
        let store = try open(namespace, invocation)
        guard try !store.allValues().isEmpty else {
            let hint = Hints.didYouMean(namespace, among: (try? namespaces(invocation)) ?? [])
            throw Failure.notFound(
                "\(invocation.command): namespace \(String(reflecting: namespace)) has no keys in the database\(hint); "
                    + "run `prefs domains --postgres-env \(invocation["--postgres-env"]!)` to list them")
        }
        return store
    }
}
