# product-extractor — two commands:
#   make run    install what is missing, build, open the app
#   make test   install what is missing, run every test (Rust, UI, real window under Xvfb)
# Other targets: make lint, make bench, make bench-startup, make release, make deps.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# Debian 12 packages: the webview and GTK for Tauri, cmake+nasm for libjpeg-turbo's SIMD build,
# Xvfb + WebKitWebDriver for the real-window tests; python3-venv for the Google SDK check;
# postgresql for the team catalog's tests (a throwaway server, scripts/with-postgres).
APT_PACKAGES := build-essential pkg-config libssl-dev cmake nasm curl \
	libwebkit2gtk-4.1-dev libgtk-3-dev libsoup-3.0-dev librsvg2-dev libayatana-appindicator3-dev libxdo-dev \
	xvfb xauth webkit2gtk-driver python3-venv dbus gnome-keyring postgresql openssl
BENCH_PACKAGES := libvips-tools
CARGO_BIN := $(HOME)/.cargo/bin
export PATH := $(CARGO_BIN):$(PATH)
APP_DEBUG := target/debug/product-extractor
XVFB := xvfb-run -a -s "-screen 0 1280x800x24"
# The tests run under a real Secret Service (the OS keyring the app keeps the API key in): a
# private D-Bus session with gnome-keyring unlocked, its keyring files in a throwaway directory so
# that a developer's own keyring is never touched.
WITH_KEYRING := scripts/with-keyring
# The team catalog's tests need a PostgreSQL server: a throwaway one on 127.0.0.1 on a free port,
# its URL in PRODUCT_EXTRACTOR_TEST_PG_URL, stopped and removed after (about 2 s).
WITH_POSTGRES := scripts/with-postgres

.PHONY: help run release package test test-rust test-ui test-e2e test-sdk test-package lint bench bench-api bench-startup deps deps-system deps-ui deps-driver ui bindings-check clean

help:
	@sed -n '2,4p' Makefile | sed 's/^# *//'

## Dependencies: each step does nothing when it is already satisfied.
deps: deps-system deps-ui

deps-system:
	@missing=$$(for p in $(APT_PACKAGES) $(EXTRA_PACKAGES); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "Installing Debian packages: $$missing"; \
		$(SUDO) apt-get update -qq; \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi
	@command -v cargo >/dev/null || { echo "Rust is missing: install it from https://rustup.rs, then run make again."; exit 1; }
	@command -v npm >/dev/null || { echo "Node.js 20+ and npm are missing: install them, then run make again."; exit 1; }

deps-ui: ui/node_modules/.package-lock.json

ui/node_modules/.package-lock.json: ui/package-lock.json ui/package.json
	npm --prefix ui ci --no-audit --no-fund
	@touch $@

deps-driver: deps-system
	@command -v tauri-driver >/dev/null || cargo install tauri-driver --locked

## The UI must be built before any cargo build: tauri embeds ui/dist.
ui: deps-ui
	npm --prefix ui run build

## Build and open the app (debug profile; the pixel-work dependencies are optimized anyway).
run: deps ui
	cargo build
	@[ -n "$${DISPLAY:-}$${WAYLAND_DISPLAY:-}" ] || { echo "No display: run the app in a desktop session, or under Xvfb: xvfb-run $(APP_DEBUG)"; exit 1; }
	./$(APP_DEBUG)

release: deps ui
	cargo build --release

## The installers: a .deb (Debian, Ubuntu) and an AppImage, with Tauri's bundler, from a release
## build. They land in target/release/bundle/{deb,appimage}/.
package: deps ui
	ui/node_modules/.bin/tauri build --bundles deb
	ui/node_modules/.bin/tauri build --bundles appimage || { echo "The AppImage needs linuxdeploy, which Tauri's bundler downloads from GitHub: not reachable from this machine. The .deb is built."; }

## Every test: UI checks and unit tests, Rust unit/integration/IPC/CLI tests, then the real window
## under Xvfb driven through tauri-driver + WebKitWebDriver (against the test build of the binary).
## A test run compiles each crate once: incremental caches (3 GB of a cold run's 12 GB target/)
## only pay off for edit-compile loops, so the test targets turn them off.
test test-rust test-e2e test-sdk test-package: export CARGO_INCREMENTAL := 0
test: deps deps-driver test-ui ui test-rust test-e2e test-sdk test-package bindings-check
	@echo "make test: all passed"

test-ui: deps-ui
	npm --prefix ui run check
	npm --prefix ui test

## Then the field table's proof: the core with one more field (product/added_field.rs). The whole
## workspace's libraries, so that every dependency keeps test-rust's features (no second build).
test-rust: ui
	$(WITH_POSTGRES) $(WITH_KEYRING) cargo test --workspace
	cargo test --workspace --lib --features product-extractor-core/added-field-test -- product::added_field

test-e2e: ui deps-driver
	env -u DISPLAY $(WITH_POSTGRES) $(WITH_KEYRING) $(XVFB) cargo test --workspace --test e2e -- --ignored --test-threads=1

## The .deb, built from the test profile (CI builds one profile), installed with apt on this
## machine, its /usr/bin/product-extractor run against the fake Gemini, then removed.
test-package: ui
	ui/node_modules/.bin/tauri build --debug --bundles deb
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ./target/debug/bundle/deb/product-extractor_*_amd64.deb
	status=0; $(WITH_KEYRING) cargo test --test package -- --ignored || status=$$?; \
	$(SUDO) apt-get remove -y -qq product-extractor; exit $$status

## Google's official Python SDK (google-genai, from PyPI, in a throwaway venv under target/)
## against the project's fake Gemini, started for each script: every answer must parse, and the
## client's golden request bodies must load into the SDK's own request types. Then the HTTP API's
## OpenAPI document, validated by openapi-spec-validator, and every operation in it called
## (tests/sdk/check_openapi.py). Each script in
## SDK_CHECKS takes --fake BINARY --golden DIR --image JPEG; any failure fails the target.
SDK_VENV := target/sdk-venv
SDK_CHECKS := tests/sdk/check_fake.py tests/sdk/batch_roundtrip.py tests/sdk/check_openapi.py
## The fake's binary and the golden bodies come from exactly test-rust's `cargo test --workspace`
## (only a few tests run): any narrower selection (`-p`, or `--test NAME`, which leaves out the
## packages without that target) resolves other features and compiles dozens of crates a second
## time (~0.8 GB; a cold CI machine once ran out of disk on it).
SDK_TESTS := golden_request_bodies prints_its_url_answers_with_its_key refuses_a_bad_command_line
test-sdk: deps-system ui
	cargo test --workspace -- $(SDK_TESTS)
	[ -x $(SDK_VENV)/bin/python ] || python3 -m venv $(SDK_VENV)
	$(SDK_VENV)/bin/pip install --quiet --disable-pip-version-check -r tests/sdk/requirements.txt
	for check in $(SDK_CHECKS); do \
		$(SDK_VENV)/bin/python $$check --fake target/debug/fake-gemini \
			--golden src-tauri/core/tests/golden --image tests/fixtures/product.jpg || exit 1; \
	done

## The TypeScript types are generated from Rust by the tests above; fail if they drifted.
bindings-check:
	@git diff --exit-code --stat -- ui/src/bindings || { echo "ui/src/bindings changed: commit the regenerated TypeScript types."; exit 1; }
	@untracked=$$(git ls-files --others --exclude-standard ui/src/bindings); [ -z "$$untracked" ] || { echo "new generated types not committed: $$untracked"; exit 1; }

lint: deps ui
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	npm --prefix ui run check

bench: deps ui
	@$(MAKE) --no-print-directory deps-system EXTRA_PACKAGES="$(BENCH_PACKAGES)"
	cargo bench -p product-extractor-core --bench prepare
	cargo bench -p product-extractor-core --bench barcode

## The HTTP API against the CLI, and 200 clients at once (issue 25): prints BENCHMARKS.md's tables.
bench-api: deps ui
	cargo build --bin product-extractor
	cargo build -p fake-gemini --bin fake-gemini
	$(WITH_KEYRING) scripts/bench-api.py --app $(APP_DEBUG) --fake target/debug/fake-gemini -n 100

## The window's launch-to-interactive time (release build, under Xvfb) with an empty catalog
## (the reference), a 100,000-product catalog, and a 100,000-product catalog at schema 2 that the
## first start migrates behind the progress window. Prints the table BENCHMARKS.md records.
STARTUP_DIR := $(CURDIR)/target/bench-startup
bench-startup: deps ui
	cargo build --release
	mkdir -p $(STARTUP_DIR)/empty
	@# The catalog bench also times queries and exits 1 when a target is missed (on a loaded machine); here it only builds the catalog.
	[ -f $(STARTUP_DIR)/current/catalog.sqlite3 ] || cargo bench -p product-extractor-core --bench catalog -- --keep $(STARTUP_DIR)/current || [ -f $(STARTUP_DIR)/current/catalog.sqlite3 ]
	[ -f $(STARTUP_DIR)/v2.sqlite3 ] || cargo bench -p product-extractor-core --bench catalog -- --write-v2 $(STARTUP_DIR)/v2.sqlite3
	rm -rf $(STARTUP_DIR)/upgrade && mkdir -p $(STARTUP_DIR)/upgrade && cp $(STARTUP_DIR)/v2.sqlite3 $(STARTUP_DIR)/upgrade/catalog.sqlite3
	@echo "| catalog | median, in the process | median, exec to the log line | each run (ms) | runs |"
	@echo "|---|---|---|---|---|"
	@for run in "empty 5 empty (reference)" "current 5 100,000 products" "upgrade 1 100,000 products at schema 2 (first start migrates)"; do \
		set -- $$run; dir=$$1 runs=$$2; shift 2; \
		env -u DISPLAY $(WITH_KEYRING) $(XVFB) scripts/bench-startup target/release/product-extractor $(STARTUP_DIR)/$$dir $$runs "$$*"; \
	done

clean:
	cargo clean
	rm -rf ui/dist ui/node_modules gen
