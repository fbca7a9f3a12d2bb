# `make demo` runs the demo, `make test` runs every check CI runs. Both install libsodium first if needed.
.PHONY: deps demo test format

deps:
	@scripts/install-deps.sh

demo: deps
	swift run prefs-demo

test: deps
	scripts/test.sh

format:
	swift format -i -r Sources Tests Package.swift

# Reliability: `make reliability` is the CI-sized suite, `make soak` the same ten times longer (figures in
# RELIABILITY.md), `make tsan` the tests under ThreadSanitizer, `make fuzz` libFuzzer over the store decoders
# (PREFS_FUZZ_SECONDS, default 60), `make asan` the tests under AddressSanitizer with LeakSanitizer.
.PHONY: reliability soak tsan fuzz asan

reliability: deps
	scripts/reliability.sh

soak: deps
	PREFS_SOAK=1 scripts/reliability.sh

tsan: deps
	scripts/tsan.sh

fuzz: deps
	scripts/fuzz.sh

asan: deps
	scripts/asan.sh
