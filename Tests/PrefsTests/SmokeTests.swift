import Testing
@testable import Prefs

@Test func placeholder() { #expect(PrefValue.integer(UInt64.max) == .unsignedInt(UInt64.max)) }
