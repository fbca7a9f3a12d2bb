import Foundation
import Testing

@testable import Prefs

/// Released secure memory is wiped, then kept locked for the next allocation of its shape, within fixed limits:
/// what lets a vault open without setting up and tearing down locked pages and guard pages every time.
@Suite struct SecureMemoryPoolTests {
    /// Allocates `count` bytes as `protection` says, fills them with a recognisable secret, releases them, and returns
    /// the address they had.
    private func releaseFilledAllocation(count: Int, protection: SecureBytes.Protection) -> UInt {
        let secret = SecureBytes(count: count, protection: protection)
        secret.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 0xAB) }
        return secret.withUnsafeBytes { UInt(bitPattern: $0.baseAddress) }
    }

    @Test func releasedKeyMemoryIsReusedForTheNextKeyOfItsSizeAndHoldsNothingOfTheOld() {
        // A size no other test uses, so another test running at the same time does not take the allocation.
        let count = 977
        var reused = false
        for _ in 0..<20 {
            let released = releaseFilledAllocation(count: count, protection: .guarded)
            #expect(SecureMemoryPool.keptMemoryIsZero(), "wiped as it was released")
            let next = SecureBytes(count: count)
            next.withUnsafeBytes { bytes in
                #expect(bytes.allSatisfy { $0 == 0 }, "handed out zeroed")
                if UInt(bitPattern: bytes.baseAddress) == released { reused = true }
            }
        }
        #expect(reused, "a released key buffer of the same size is handed out again")
    }

    @Test func releasedPayloadPagesAreReusedLockedAndHoldNothingOfTheOld() {
        let page = SecureMemoryPool.pageSize
        // Half the pool's allowance, and a size no other test's vault comes near (a kept region only serves requests
        // of at least half its size). An allowance under two pages keeps nothing, and there is nothing to check.
        let pages = SecureMemoryPool.lockedLimit / page / 2
        guard pages >= 1 else { return }
        let count = pages * page - 17
        var reused = false
        for _ in 0..<20 {
            let wasLocked = SecureBytes(count: 1, protection: .locked).isLocked
            let released = releaseFilledAllocation(count: count, protection: .locked)
            #expect(SecureMemoryPool.keptMemoryIsZero(), "wiped as it was released")
            let next = SecureBytes(count: count, protection: .locked)
            next.withUnsafeBytes { bytes in
                #expect(bytes.allSatisfy { $0 == 0 }, "handed out zeroed")
                if UInt(bitPattern: bytes.baseAddress) == released { reused = true }
            }
            #expect(next.isLocked == wasLocked, "kept pages stay locked")
        }
        #expect(reused, "released payload pages are handed out again")
    }

    @Test func thePoolKeepsNoMoreThanItsLimits() {
        releaseMany()
        var limit = rlimit()
        #expect(getrlimit(__rlimit_resource_t(__RLIMIT_MEMLOCK.rawValue), &limit) == 0)
        #expect(SecureMemoryPool.lockedLimit <= 1 << 20)
        if limit.rlim_cur != rlim_t.max {
            #expect(SecureMemoryPool.lockedLimit <= Int(clamping: limit.rlim_cur / 4), "a quarter of RLIMIT_MEMLOCK")
        }
        let kept = SecureMemoryPool.kept
        #expect(kept.guarded <= SecureMemoryPool.guardedLimit)
        #expect(kept.lockedBytes <= SecureMemoryPool.lockedLimit)
    }

    /// Allocates more than the pool keeps, all at once, and releases it all together.
    private func releaseMany() {
        let keys = (0..<(3 * SecureMemoryPool.guardedLimit)).map { _ in SecureBytes(count: 32) }
        let regions = (0..<12).map { _ in
            SecureBytes(count: max(1, SecureMemoryPool.lockedLimit / 3), protection: .locked)
        }
        withExtendedLifetime((keys, regions)) {}
    }
}
