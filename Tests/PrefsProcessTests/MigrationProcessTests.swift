import Foundation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

/// Processes that declare a migrating key at the same moment: the conversion (the app's closure, run outside every
/// lock) may run in each, but one result is stored and one migration is reported, as the docs say.
@Suite(.ownThreads) struct MigrationProcessTests {
    @Test(arguments: [Backend.file, .userDefaults, .vault])
    func processesMigratingAtOnceStoreOneResultAndReportItOnce(_ backend: Backend) throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let spec = backend.spec(in: directory)
        try StoreSpec.open(spec).setValue(.int(14), forKey: "fontSize")
        let children = try (0..<4).map { _ in
            try ChildProcess.start(["migrate-on-go", spec], input: .pipe, timeLimit: .seconds(120))
        }
        defer { for child in children { child.kill() } }
        for child in children { #expect(child.readLine() == "ready") }
        for child in children { child.write("go\n") }
        let exits = children.map { $0.wait() }
        for exit in exits { #expect(exit.succeeded, "\(exit)") }

        // Every process reads the converted value; the closure ran in one or more of them (it is outside every
        // lock); exactly one reported the migration, the one whose write moved the value.
        for exit in exits { #expect(exit.lines.contains("value 14pt"), "\(exit.lines)") }
        let conversions = exits.map { $0.lines.filter { $0 == "converted" }.count }.reduce(0, +)
        #expect(conversions >= 1)
        let reports = exits.compactMap { $0.lines.last(where: { $0.hasPrefix("reports ") }) }
        #expect(reports.sorted() == ["reports 0", "reports 0", "reports 0", "reports 1"], "\(reports)")
        let store = try StoreSpec.open(spec)
        #expect(try store.value(forKey: "size") == .string("14pt"))
        #expect(try store.value(forKey: "fontSize") == nil)
    }
}
