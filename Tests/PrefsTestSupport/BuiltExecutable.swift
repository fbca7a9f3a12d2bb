public import Foundation

/// `builtExecutable(named: "PrefsTestHelper")` finds an executable SwiftPM built next to the running test bundle.
///
/// On Linux the test binary sits in the build folder itself; on macOS it is inside
/// `PrefsPackageTests.xctest/Contents/MacOS`, so the search walks up until it finds the executable.
public func builtExecutable(named name: String) -> URL {
    let running =
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    var directory = URL(filePath: running).deletingLastPathComponent()
    while !FileManager.default.isExecutableFile(atPath: directory.appending(path: name).path), directory.path != "/" {
        directory = directory.deletingLastPathComponent()
    }
    return directory.appending(path: name)
}
