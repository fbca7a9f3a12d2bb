import Foundation
import Prefs
import PrefsTestSupport
import TestThreads
import Testing

@testable import PrefsCLICore

/// What `prefs read` prints for a date, `prefs write` takes back as the same date, however far from now it is; and
/// `prefs export` writes its file as privately as the domain's own.
@Suite(.ownThreads) struct PrintedDateTests {
    /// About a hundred seconds since 2001: the extremes of a `Double`, the edges of the 64-bit range of whole seconds
    /// where the printed form changes, and random ones of every magnitude.
    static let seconds: [Double] = {
        var seconds: [Double] = [
            0, -0.0, 0.5, -0.5, .leastNonzeroMagnitude, -.leastNonzeroMagnitude, 1e-300, .greatestFiniteMagnitude,
            -.greatestFiniteMagnitude, 1e300, -1e300, 1e19, -1e19, 9.2e18, -9.2e18, 9.3e18, -9.3e18,
            9.223372036854775e18,
            -9.223372036854775e18, 1e16, -1e16, 6.7e16, 123_456.789, -978_307_200, .infinity, -.infinity, .nan,
        ]
        var random = SplitMix64(seed: 5)
        while seconds.count < 100 {
            let magnitude = Double.random(in: -10...308, using: &random)
            seconds.append((Bool.random(using: &random) ? 1 : -1) * pow(10, magnitude))
        }
        return seconds
    }()

    private static func same(_ left: PrefValue?, _ right: Double) -> Bool {
        guard case .date(let date)? = left else { return false }
        let seconds = date.timeIntervalSinceReferenceDate
        return seconds.isNaN ? right.isNaN : seconds == right
    }

    @Test func everyPrintedDateParsesBackToTheSameDate() {
        for seconds in Self.seconds {
            let date = Date(timeIntervalSinceReferenceDate: seconds)
            let printed = ValueText.format(.date(date))
            #expect(Self.same(ValueText.parse(printed, as: .date), seconds), "\(seconds) printed as \(printed)")
            let foundationStyle = ISODate.format(date, style: .foundation)
            #expect(Self.same(ISODate.parse(foundationStyle).map(PrefValue.date), seconds), "\(foundationStyle)")
        }
    }

    @Test func theToolWritesBackWhatItReads() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        let extremes: [Double] = [1e300, -1e300, .greatestFiniteMagnitude, 1e19, -9.3e18, .nan, -.infinity, 0.25]
        let store = try SuiteFileStore(suiteName: "app", directory: sandbox.config)
        for (index, seconds) in extremes.enumerated() {
            try store.setValue(.date(Date(timeIntervalSinceReferenceDate: seconds)), forKey: "d\(index)")
        }
        for index in extremes.indices {
            let read = try sandbox.prefs("read", "app", "d\(index)")
            read.expectSuccess()
            let printed = String(read.output.dropLast())
            let written = try sandbox.prefs("write", "app", "d\(index)", printed)
            #expect(written.status == 0, "\(extremes[index]) printed as \(printed): \(written)")
        }
        let back = try SuiteFileStore(suiteName: "app", directory: sandbox.config).allValues()
        for (index, seconds) in extremes.enumerated() {
            #expect(Self.same(back["d\(index)"], seconds), "\(seconds)")
        }
    }

    /// A domain's file is 0600; so is its export, whatever the umask (`Data.write` would leave it 0644 under 022).
    @Test(arguments: ["022", "000", "077"])
    func anExportIsCreatedPrivateWhateverTheUmask(umask: String) throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        try SuiteFileStore(suiteName: "app", directory: sandbox.config).setValue(.string("secret"), forKey: "k")
        for (name, format) in [("app.json", "json"), ("app.plist", "xml"), ("app.bin", "binary")] {
            let path = sandbox.path(name)
            let child = try ChildProcess(
                URL(filePath: "/bin/sh"),
                [
                    "-c", "umask \(umask) && exec \"$0\" \"$@\"", PrefsProcess.binary.path, "export", "app", path,
                    "--format", format,
                ],
                environment: sandbox.environment)
            let result = PrefsResult(child.wait())
            result.expectSuccess()
            let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
            #expect(mode == 0o600, "\(name) under umask \(umask): \(String(mode ?? 0, radix: 8))")
        }
    }
}
