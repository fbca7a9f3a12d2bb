import Foundation
import TestThreads
import Testing

/// `prefs repair DOMAIN`: the way out of a damaged domain file.
@Suite(.ownThreads) struct RepairCommandTests {
    @Test func aDamagedDomainIsKeptAsideAndWritableAgain() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        try FileManager.default.createDirectory(at: sandbox.config, withIntermediateDirectories: true)
        let garbage = Data("<?xml version=\"1.0\"?><plist><dict><key>x".utf8)
        try garbage.write(to: sandbox.plist("app"))

        let refused = try sandbox.prefs("write", "app", "theme", "dark")
        #expect(
            refused.status != 0 && refused.error.contains("prefs repair"), "the error names the way out: \(refused)")
        // One message, the tool's own: what is wrong, and the one command that deals with it.
        let path = sandbox.plist("app").path(percentEncoded: false)
        for arguments in [["write", "app", "theme", "dark"], ["read", "app", "theme"], ["read", "app"]] {
            let failed = try sandbox.prefs(arguments)
            #expect(failed.status == 3 && failed.isOneLineFailure, "\(arguments): \(failed)")
            #expect(failed.error.hasPrefix("prefs \(arguments[0]): \(path) is not a valid preferences file ("))
            #expect(
                failed.error.hasSuffix(
                    "); left untouched; run `prefs repair app` to keep it aside and start the domain afresh\n"),
                "\(arguments): \(failed)")
            #expect(!failed.error.contains("moveDamagedFileAside") && !failed.error.contains("delete it"))
        }
        #expect(try Data(contentsOf: sandbox.plist("app")) == garbage, "left untouched")

        let repaired = try sandbox.prefs("repair", "app")
        #expect(repaired.status == 0 && repaired.error.isEmpty, "\(repaired)")
        let names = try FileManager.default.contentsOfDirectory(atPath: sandbox.config.path(percentEncoded: false))
        let kept = try #require(names.first { $0.hasPrefix("app.plist.damaged-") }, "\(names)")
        #expect(repaired.output.contains(kept))
        #expect(try Data(contentsOf: sandbox.config.appending(path: kept)) == garbage, "kept as it was")

        try sandbox.prefs("write", "app", "theme", "dark").expectSuccess()
        #expect(try sandbox.prefs("read", "app", "theme").output == "dark\n")
        let again = try sandbox.prefs("repair", "app")
        #expect(again.status == 0 && again.output.isEmpty, "a readable file is left as it is: \(again)")
    }
}
