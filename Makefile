# A thin front end; Package.swift works without it.
SWIFT ?= swift
# What building the tool needs: all `make demo` installs (the demo serves its site and the bundle itself).
BUILD_PACKAGES = libarchive-dev zlib1g-dev libdeflate-dev
# What the tests use besides: real servers, real sites, real archive tools, Chromium (about 1.1 GiB with PyPI's).
DEBIAN_PACKAGES = $(BUILD_PACKAGES) libarchive-tools unzip zstd gzip curl python3 openssl python3.11-doc nginx apache2 lighttpd lighttpd-mod-deflate caddy chromium-headless-shell openjdk-17-doc rust-doc mkdocs-doc doxygen iso-codes python3-venv
# The peers the benchmarks compare with, and the tools that drive them.
BENCH_PACKAGES = nginx h2o nghttp2-client wget2 wrk time iproute2 python3.11-doc libisal-dev gcc
SUDO = $(shell [ "$$(id -u)" = 0 ] || echo sudo)
OUT ?= out
BENCH_WORK ?= /tmp/packager-bench
BIN_RELEASE = $$($(SWIFT) build -c release --show-bin-path)
# Release builds link the Swift runtime and Foundation into the binary: it runs without the toolchain's libraries, and
# starts in about half the time (docs/BENCHMARKS.md, verify). The benchmarks measure the binary make install installs.
RELEASE_FLAGS ?= --static-swift-stdlib

.PHONY: deps build test test-tsan docs demo bench bench-quick lint format clean install uninstall

# The benchmark executables exist in the package only when this is set (see Package.swift).
bench bench-quick: export PACKAGER_BENCHMARKS = 1

# Install the Debian packages the build and the tests need (skipped when already present).
deps:
	@missing=""; for p in $(DEBIAN_PACKAGES) $(EXTRA_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing what the tests use (real servers, sites, archive tools, Chromium; about 1.1 GiB):$$missing"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi
	@# Real API servers from PyPI for the API tests, and Prometheus' own parser for serve's /metrics (skipped, with the
	@# reason, where they cannot be installed).
	@[ -x .venv-api/bin/datasette ] && [ -x .venv-api/bin/kinto ] && [ -x .venv-api/bin/warcio ] && [ -x .venv-api/bin/wacz ] && .venv-api/bin/python -c "import prometheus_client, datasette_graphql" 2>/dev/null || \
		{ python3 -m venv .venv-api && .venv-api/bin/pip install -q datasette datasette-graphql kinto prometheus_client warcio wacz; } || \
		echo "could not install Datasette, Kinto, prometheus_client, warcio and py-wacz from PyPI: their tests will be skipped"
	@# An S3-compatible API server (moto) for the remote-bundle tests, in its own environment with boto3.
	@[ -x .venv-s3/bin/moto_server ] || { python3 -m venv .venv-s3 && .venv-s3/bin/pip install -q "moto[server]"; } || \
		echo "could not install moto from PyPI: the presigned-URL test will fail"
	@# mitmproxy in its own environment (its dependencies and Kinto's do not agree).
	@[ -x .venv-mitm/bin/mitmdump ] || { python3 -m venv .venv-mitm && .venv-mitm/bin/pip install -q mitmproxy; } || \
		echo "could not install mitmproxy from PyPI: its HAR tests will be skipped"
	@# pywb (Webrecorder's replay) in its own environment, for the web-archive tests.
	@[ -x .venv-pywb/bin/wayback ] || { python3 -m venv .venv-pywb && .venv-pywb/bin/pip install -q pywb; } || \
		echo "could not install pywb from PyPI: its replay test will be skipped"

build: deps
	$(SWIFT) build

# Imports match the declared dependencies (scripts/check-imports.py for other packages' products, SwiftPM's check
# for this package's targets), then the whole suite on that build, in six stages that each run (scripts/test-stages.sh
# lists every failure at the end).
test: deps
	python3 scripts/check-imports.py
	$(SWIFT) build --build-tests --explicit-target-dependency-import-check error
	@# argument-parser's manual generator, for the test of make install's files (about 30 s).
	$(SWIFT) build --package-path .build/checkouts/swift-argument-parser --scratch-path .build/generate-manual --product generate-manual
	SWIFT="$(SWIFT)" scripts/test-stages.sh

# The main job on the demo site, on loopback: an origin serves Templates/demo-site, packager build crawls it, the bundle
# answers with the origin stopped, two pages change and one is deleted, and packager verify flags those three.
# Only what building needs: the demo's site, origin and server are the tool's own.
demo:
	@missing=""; for p in $(BUILD_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi
	$(SWIFT) build --product packager
	$$($(SWIFT) build --show-bin-path)/packager demo --output $(OUT)/demo

# Every benchmark, side by side with its peer, in one run; writes docs/BENCHMARKS.md from the figures measured.
bench:
	$(MAKE) deps EXTRA_PACKAGES="$(BENCH_PACKAGES)"
	$(SWIFT) build -c release $(RELEASE_FLAGS)
	mkdir -p $(BENCH_WORK)
	$(BIN_RELEASE)/packager-bench $(BIN_RELEASE)/packager $(BENCH_WORK)/format $(BENCH_WORK)/format.md
	scripts/bench-deflate.sh $(BENCH_WORK)/deflate $(BENCH_WORK)/deflate.md
	scripts/bench-build.sh $(BIN_RELEASE)/packager $(BENCH_WORK)/build $(BENCH_WORK)/build.md
	scripts/bench-browser.sh $(BIN_RELEASE)/packager $(BENCH_WORK)/browser $(BENCH_WORK)/browser.md
	scripts/bench-serve.sh $(BIN_RELEASE) $(BENCH_WORK)/serve $(BENCH_WORK)/serve.md
	scripts/bench-serve-peers.sh $(BIN_RELEASE) $(BENCH_WORK)/serve-peers $(BENCH_WORK)/serve-peers.md
	scripts/bench-vapor.sh $(BIN_RELEASE) $(BENCH_WORK)/vapor $(BENCH_WORK)/vapor.md
	scripts/bench-delta.sh $(BIN_RELEASE) $(BENCH_WORK)/delta $(BENCH_WORK)/delta.md
	scripts/bench-remote.sh $(BIN_RELEASE) $(BENCH_WORK)/remote $(BENCH_WORK)/remote.md
	scripts/bench-fleet.sh $(BIN_RELEASE) $(BENCH_WORK)/fleet $(BENCH_WORK)/fleet.md
	scripts/bench-serve-range.sh $(BIN_RELEASE) $(BENCH_WORK)/range $(BENCH_WORK)/range.md
	scripts/bench-verify.sh $(BIN_RELEASE)/packager $(BENCH_WORK)/verify $(BENCH_WORK)/verify.md
	scripts/bench-verify-servers.sh $(BIN_RELEASE)/packager $(BENCH_WORK)/verify-servers $(BENCH_WORK)/verify-servers.md
	scripts/bench-https.sh $(BIN_RELEASE)/packager $(BENCH_WORK)/https $(BENCH_WORK)/https.md
	scripts/bench-attack.sh $(BIN_RELEASE)/packager $(BENCH_WORK)/attack $(BENCH_WORK)/attack.md
	scripts/bench-faults.sh $(BIN_RELEASE) $(BENCH_WORK)/faults $(BENCH_WORK)/faults.md
	scripts/bench-export.sh $(BIN_RELEASE) $(BENCH_WORK)/export $(BENCH_WORK)/export.md
	scripts/bench-report.sh docs/BENCHMARKS.md $(BENCH_WORK)/format.md $(BENCH_WORK)/deflate.md $(BENCH_WORK)/build.md $(BENCH_WORK)/browser.md $(BENCH_WORK)/https.md $(BENCH_WORK)/serve.md $(BENCH_WORK)/serve-peers.md $(BENCH_WORK)/vapor.md $(BENCH_WORK)/range.md $(BENCH_WORK)/delta.md $(BENCH_WORK)/remote.md $(BENCH_WORK)/fleet.md $(BENCH_WORK)/verify.md $(BENCH_WORK)/verify-servers.md $(BENCH_WORK)/attack.md $(BENCH_WORK)/faults.md $(BENCH_WORK)/export.md

# The same benchmarks on small inputs, to check the scripts; writes /tmp/BENCHMARKS-quick.md.
bench-quick:
	$(MAKE) deps EXTRA_PACKAGES="$(BENCH_PACKAGES)"
	$(SWIFT) build -c release $(RELEASE_FLAGS)
	mkdir -p $(BENCH_WORK)-quick
	$(BIN_RELEASE)/packager-bench $(BIN_RELEASE)/packager $(BENCH_WORK)-quick/format $(BENCH_WORK)-quick/format.md --quick
	scripts/bench-build.sh $(BIN_RELEASE)/packager $(BENCH_WORK)-quick/build $(BENCH_WORK)-quick/build.md --quick
	scripts/bench-browser.sh $(BIN_RELEASE)/packager $(BENCH_WORK)-quick/browser $(BENCH_WORK)-quick/browser.md --quick
	scripts/bench-serve.sh $(BIN_RELEASE) $(BENCH_WORK)-quick/serve $(BENCH_WORK)-quick/serve.md --quick
	scripts/bench-serve-peers.sh $(BIN_RELEASE) $(BENCH_WORK)-quick/serve-peers $(BENCH_WORK)-quick/serve-peers.md --quick
	scripts/bench-vapor.sh $(BIN_RELEASE) $(BENCH_WORK)-quick/vapor $(BENCH_WORK)-quick/vapor.md --quick
	scripts/bench-delta.sh $(BIN_RELEASE) $(BENCH_WORK)-quick/delta $(BENCH_WORK)-quick/delta.md --quick
	scripts/bench-remote.sh $(BIN_RELEASE) $(BENCH_WORK)-quick/remote $(BENCH_WORK)-quick/remote.md --quick
	scripts/bench-fleet.sh $(BIN_RELEASE) $(BENCH_WORK)-quick/fleet $(BENCH_WORK)-quick/fleet.md --quick
	scripts/bench-serve-range.sh $(BIN_RELEASE) $(BENCH_WORK)-quick/range $(BENCH_WORK)-quick/range.md --quick
	scripts/bench-verify.sh $(BIN_RELEASE)/packager $(BENCH_WORK)-quick/verify $(BENCH_WORK)-quick/verify.md --quick
	scripts/bench-verify-servers.sh $(BIN_RELEASE)/packager $(BENCH_WORK)-quick/verify-servers $(BENCH_WORK)-quick/verify-servers.md --quick
	scripts/bench-https.sh $(BIN_RELEASE)/packager $(BENCH_WORK)-quick/https $(BENCH_WORK)-quick/https.md --quick
	scripts/bench-attack.sh $(BIN_RELEASE)/packager $(BENCH_WORK)-quick/attack $(BENCH_WORK)-quick/attack.md --quick
	scripts/bench-faults.sh $(BIN_RELEASE) $(BENCH_WORK)-quick/faults $(BENCH_WORK)-quick/faults.md --quick
	scripts/bench-export.sh $(BIN_RELEASE) $(BENCH_WORK)-quick/export $(BENCH_WORK)-quick/export.md --quick
	scripts/bench-report.sh /tmp/BENCHMARKS-quick.md $(BENCH_WORK)-quick/format.md $(BENCH_WORK)-quick/build.md $(BENCH_WORK)-quick/browser.md $(BENCH_WORK)-quick/https.md $(BENCH_WORK)-quick/serve.md $(BENCH_WORK)-quick/serve-peers.md $(BENCH_WORK)-quick/vapor.md $(BENCH_WORK)-quick/range.md $(BENCH_WORK)-quick/delta.md $(BENCH_WORK)-quick/remote.md $(BENCH_WORK)-quick/fleet.md $(BENCH_WORK)-quick/verify.md $(BENCH_WORK)-quick/verify-servers.md $(BENCH_WORK)-quick/attack.md $(BENCH_WORK)-quick/faults.md $(BENCH_WORK)-quick/export.md

# The concurrent-read, crawl and crawl-pipeline tests under the thread sanitizer (a separate build folder, .build-tsan).
test-tsan: deps
	$(SWIFT) test --scratch-path .build-tsan --sanitize=thread --filter "concurrentReads|crawlsTheSite|compressesWhileCrawling|EntryStore"

# DocC catalogs of the public modules, built with the toolchain's docc into .build-docs/site.
docs:
	scripts/docs.sh

lint:
	@# Tests/OfflineBundleOpenAPITests/KintoClient is swift-openapi-generator's output, kept as generated.
	$(SWIFT) format lint --strict $$(find Sources Tests Plugins -name '*.swift' -not -path 'Tests/OfflineBundleOpenAPITests/KintoClient/*') Package.swift

format:
	$(SWIFT) format --in-place $$(find Sources Tests Plugins -name '*.swift' -not -path 'Tests/OfflineBundleOpenAPITests/KintoClient/*') Package.swift

# Installs the tool, a man page per command (argument-parser's generate-manual, built from the resolved checkout into
# .build/generate-manual) and bash, zsh and fish completions under PREFIX (default /usr/local); CONFIG=debug installs a
# debug build; DESTDIR stages the files for a package.
PREFIX ?= /usr/local
CONFIG ?= release
install:
	@missing=""; for p in $(BUILD_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; fi
	$(SWIFT) build -c $(CONFIG) $(if $(filter release,$(CONFIG)),$(RELEASE_FLAGS)) --product packager
	$(SWIFT) build --package-path .build/checkouts/swift-argument-parser --scratch-path .build/generate-manual --product generate-manual
	SWIFT="$(SWIFT)" scripts/install.sh "$$($(SWIFT) build -c $(CONFIG) --show-bin-path)/packager" \
		"$$($(SWIFT) build --package-path .build/checkouts/swift-argument-parser --scratch-path .build/generate-manual --show-bin-path)/generate-manual" \
		"$(DESTDIR)$(PREFIX)"

uninstall:
	scripts/install.sh --uninstall "$(DESTDIR)$(PREFIX)"

clean:
	rm -rf .build $(OUT)
