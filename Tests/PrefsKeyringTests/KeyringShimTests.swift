import CLibSecret
import Foundation
import PrefsTestSupport
import TestThreads
import Testing

/// CLibSecret declares the libsecret and GLib calls PrefsKeyring makes instead of including their headers (whose
/// pkg-config flags would make SwiftPM warn in every build of every user's package): each constant and struct layout
/// the declarations give Swift is checked here against the real headers, by a C program compiled with them.
@Suite(.ownThreads) struct KeyringShimTests {
    @Test func theDeclaredConstantsAndLayoutsAreTheRealHeaders() throws {
        let constants: [(String, Int)] = [
            ("G_BUS_TYPE_SESSION", Int(G_BUS_TYPE_SESSION.rawValue)),
            ("SECRET_SERVICE_OPEN_SESSION", Int(SECRET_SERVICE_OPEN_SESSION.rawValue)),
            ("SECRET_COLLECTION_NONE", Int(SECRET_COLLECTION_NONE.rawValue)),
            ("SECRET_ITEM_CREATE_NONE", Int(SECRET_ITEM_CREATE_NONE.rawValue)),
            ("SECRET_SEARCH_ALL", Int(SECRET_SEARCH_ALL.rawValue)),
            ("SECRET_ERROR_IS_LOCKED", Int(SECRET_ERROR_IS_LOCKED.rawValue)),
            ("SECRET_SCHEMA_NONE", Int(SECRET_SCHEMA_NONE.rawValue)),
            ("SECRET_SCHEMA_DONT_MATCH_NAME", Int(SECRET_SCHEMA_DONT_MATCH_NAME.rawValue)),
            ("SECRET_SCHEMA_ATTRIBUTE_STRING", Int(SECRET_SCHEMA_ATTRIBUTE_STRING.rawValue)),
            ("G_IO_ERROR_CLOSED", Int(G_IO_ERROR_CLOSED.rawValue)),
            ("G_IO_ERROR_CANCELLED", Int(G_IO_ERROR_CANCELLED.rawValue)),
            ("G_IO_ERROR_TIMED_OUT", Int(G_IO_ERROR_TIMED_OUT.rawValue)),
            ("G_IO_ERROR_BROKEN_PIPE", Int(G_IO_ERROR_BROKEN_PIPE.rawValue)),
            ("G_IO_ERROR_CONNECTION_CLOSED", Int(G_IO_ERROR_CONNECTION_CLOSED.rawValue)),
            ("G_DBUS_ERROR_SERVICE_UNKNOWN", Int(G_DBUS_ERROR_SERVICE_UNKNOWN.rawValue)),
            ("G_DBUS_ERROR_NAME_HAS_NO_OWNER", Int(G_DBUS_ERROR_NAME_HAS_NO_OWNER.rawValue)),
            ("G_DBUS_ERROR_NO_REPLY", Int(G_DBUS_ERROR_NO_REPLY.rawValue)),
            ("G_DBUS_ERROR_NO_SERVER", Int(G_DBUS_ERROR_NO_SERVER.rawValue)),
            ("G_DBUS_ERROR_TIMEOUT", Int(G_DBUS_ERROR_TIMEOUT.rawValue)),
            ("G_DBUS_ERROR_DISCONNECTED", Int(G_DBUS_ERROR_DISCONNECTED.rawValue)),
            ("G_DBUS_ERROR_TIMED_OUT", Int(G_DBUS_ERROR_TIMED_OUT.rawValue)),
            ("G_DBUS_ERROR_SPAWN_EXEC_FAILED", Int(G_DBUS_ERROR_SPAWN_EXEC_FAILED.rawValue)),
            ("G_DBUS_ERROR_SPAWN_FORK_FAILED", Int(G_DBUS_ERROR_SPAWN_FORK_FAILED.rawValue)),
            ("G_DBUS_ERROR_SPAWN_CHILD_EXITED", Int(G_DBUS_ERROR_SPAWN_CHILD_EXITED.rawValue)),
            ("G_DBUS_ERROR_SPAWN_CHILD_SIGNALED", Int(G_DBUS_ERROR_SPAWN_CHILD_SIGNALED.rawValue)),
            ("G_DBUS_ERROR_SPAWN_FAILED", Int(G_DBUS_ERROR_SPAWN_FAILED.rawValue)),
            ("G_DBUS_ERROR_SPAWN_SERVICE_INVALID", Int(G_DBUS_ERROR_SPAWN_SERVICE_INVALID.rawValue)),
            ("G_DBUS_ERROR_SPAWN_SERVICE_NOT_FOUND", Int(G_DBUS_ERROR_SPAWN_SERVICE_NOT_FOUND.rawValue)),
            ("G_DBUS_ERROR_SPAWN_FILE_INVALID", Int(G_DBUS_ERROR_SPAWN_FILE_INVALID.rawValue)),
            ("sizeof(SecretSchema)", MemoryLayout<SecretSchema>.size),
            ("offsetof(SecretSchema, flags)", MemoryLayout<SecretSchema>.offset(of: \.flags)!),
            ("offsetof(SecretSchema, attributes)", MemoryLayout<SecretSchema>.offset(of: \.attributes)!),
            ("offsetof(SecretSchema, reserved)", MemoryLayout<SecretSchema>.offset(of: \.reserved)!),
            ("sizeof(SecretSchemaAttribute)", MemoryLayout<SecretSchemaAttribute>.size),
            ("sizeof(GError)", MemoryLayout<GError>.size),
            ("offsetof(GError, message)", MemoryLayout<GError>.offset(of: \.message)!),
            ("sizeof(GList)", MemoryLayout<GList>.size),
            ("offsetof(GList, next)", MemoryLayout<GList>.offset(of: \.next)!),
            ("sizeof(gboolean)", MemoryLayout<gboolean>.size), ("sizeof(GQuark)", MemoryLayout<GQuark>.size),
            ("sizeof(gsize)", MemoryLayout<gsize>.size), ("sizeof(GType)", MemoryLayout<GType>.size),
        ]
        let folder = try TempDir()
        defer { folder.cleanup() }
        let checks = constants.map { name, value in
            "_Static_assert((long)(\(name)) == \(value)L, \"\(name) is not \(value) in the real headers\");"
        }
        try (["#include <stddef.h>", "#include <libsecret/secret.h>"] + checks).joined(separator: "\n")
            .write(to: folder.file("check.c"), atomically: true, encoding: .utf8)
        let flags = try ChildProcess.run(
            URL(filePath: "/usr/bin/env"), ["pkg-config", "--cflags", "libsecret-1"], timeLimit: .seconds(30))
        #expect(flags.succeeded, "libsecret-1-dev is not installed: \(flags)")
        let compiled = try ChildProcess.run(
            URL(filePath: "/usr/bin/env"),
            ["cc", "-fsyntax-only"]
                + flags.output.split(separator: " ").map { String($0).trimmingCharacters(in: .whitespacesAndNewlines) }
                .filter { !$0.isEmpty } + [folder.path("check.c")],
            timeLimit: .seconds(60))
        #expect(compiled.succeeded, "\(compiled.error)")
    }
}
