import Foundation
import Prefs
import TestThreads
import Testing

@testable import PrefsCLICore

#if canImport(Glibc)
    import Glibc
#endif

/// How `prefs` turns an error into its message and exit status.
@Suite(.ownThreads) struct FailureTests {
    @Test func aChangeWhoseDurabilityIsNotConfirmedHasItsOwnStatus() {
        let failure = Failure.from(
            PrefsError.durabilityNotConfirmed(path: "/v", operation: "sync directory /", errno: EIO, message: "I/O"))
        #expect(failure.status == .notDurable && failure.status.rawValue == 4)
        #expect(failure.message.contains("was made") && failure.message.contains("do not undo"))
    }
}
