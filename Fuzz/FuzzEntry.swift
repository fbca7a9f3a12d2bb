// libFuzzer entry point, compiled into the Prefs module itself by scripts/fuzz.sh (`make fuzz`) so it can call
// the snapshot decoders that FileStore, SuiteFileStore and EncryptedFileStore run on every file they open, and
// the decoder of a vault's plaintext (which the vault's authentication keeps fuzzed bytes from reaching otherwise).
// Each input goes through all four; any error that is not a PrefsError or VaultError, and any crash, is a finding.
import Foundation

private let vaultCodec: VaultSnapshotCodec = {
    let keyPath = ProcessInfo.processInfo.environment["PREFS_FUZZ_KEY"] ?? "/nonexistent"
    return VaultSnapshotCodec(key: .keyFile(URL(filePath: keyPath)), cost: .testing, vaultPath: "/nonexistent/fuzz")
}()

private let codecs: [any SnapshotCodec] = [JSONSnapshotCodec(), PropertyListSnapshotCodec(), vaultCodec]

@_cdecl("LLVMFuzzerTestOneInput")
public func prefsFuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Data(bytes: data, count: size)
    for codec in codecs {
        do {
            _ = try codec.decode(bytes, path: "fuzz-input")
        } catch is PrefsError {
        } catch is VaultError {
        } catch {
            fatalError("\(type(of: codec)) threw an untyped error: \(error)")
        }
    }
    _ = try? VaultPayload.decode(UnsafeRawBufferPointer(start: data, count: size), path: "fuzz-input")
    return 0
}
