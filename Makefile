# A thin front end; Package.swift works without it.
SWIFT ?= swift
DEBIAN_PACKAGES = libarchive-dev libarchive-tools zlib1g-dev unzip zstd python3
SUDO = $(shell [ "$$(id -u)" = 0 ] || echo sudo)
OUT ?= out
BENCH_WORK ?= /tmp/packager-bench

.PHONY: deps build test demo bench bench-quick lint format clean

# Install the Debian packages the build and the tests need (skipped when already present).
deps:
	@missing=""; for p in $(DEBIAN_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

build: deps
	$(SWIFT) build

test: deps
	$(SWIFT) test

# The main job on the embedded demo site: pack it, inspect it, check it, and read it back with standard tools.
demo: deps
	$(SWIFT) build --product packager
	@mkdir -p $(OUT)
	$$($(SWIFT) build --show-bin-path)/packager pack Templates/demo-site --base-url http://127.0.0.1:8080/ --drop-query 'utm_*' -o $(OUT)/demo.bundle.zip
	$$($(SWIFT) build --show-bin-path)/packager inspect $(OUT)/demo.bundle.zip
	$$($(SWIFT) build --show-bin-path)/packager check $(OUT)/demo.bundle.zip
	unzip -tq $(OUT)/demo.bundle.zip
	$$($(SWIFT) build --show-bin-path)/packager export $(OUT)/demo.bundle.zip --format tar.zst -o $(OUT)/demo.tar.zst
	@echo
	@echo "demo bundle: $(OUT)/demo.bundle.zip   tarball: $(OUT)/demo.tar.zst"

# Every benchmark, side by side with its peer; writes docs/BENCHMARKS.md.
bench: deps
	$(SWIFT) build -c release
	$$($(SWIFT) build -c release --show-bin-path)/packager-bench $$($(SWIFT) build -c release --show-bin-path)/packager $(BENCH_WORK) docs/BENCHMARKS.md

bench-quick: deps
	$(SWIFT) build -c release
	$$($(SWIFT) build -c release --show-bin-path)/packager-bench $$($(SWIFT) build -c release --show-bin-path)/packager $(BENCH_WORK)-quick /tmp/BENCHMARKS-quick.md --quick

lint:
	$(SWIFT) format lint --recursive --strict Sources Tests Package.swift

format:
	$(SWIFT) format --in-place --recursive Sources Tests Package.swift

clean:
	rm -rf .build $(OUT)
