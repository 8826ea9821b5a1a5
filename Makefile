# The two set-up commands of the README. Each creates the virtual environment on first use.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
# jsii (under aws-cdk-lib) prints a Node 20 end-of-life banner on every call otherwise.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20

CDK := infra/node_modules/.bin/cdk
ARCH ?= x86_64

.PHONY: serve test test-fast test-arm64 test-research lint layer synth deploy
# qemu user mode runs the int8 gate as an AVX2-only CPU (-cpu Haswell) on any x86 machine.
QEMU := /usr/bin/qemu-x86_64-static

# --no-compile: byte-compiling every installed module took two thirds of the install (185 s against 55 s,
# docs/testing.md); Python compiles what it imports, once, on first use.
$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet --no-compile -e '.[test]'
	touch $@

## serve: build, gate and publish the local artifact (once), then serve the API on 127.0.0.1:8000
serve: $(BIN)/.installed
	$(BIN)/laya-artifacts demo

# Test files are spread over TEST_WORKERS processes (pytest-xdist), a file's tests kept together so that its
# module-scoped fixtures are built once; TEST_WORKERS=0 runs the suite in this process.
TEST_WORKERS ?= 2

## test: lint and types, the Lambda package (size-checked), then the whole suite (unit, functional, infra, parity)
test: $(BIN)/.installed $(CDK) $(QEMU)
	$(MAKE) --no-print-directory -j2 --output-sync=target lint layer   # one core each: mypy, and the package build
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile -m "not arm64"

## test-fast: the inner loop: lint, types, and every test that builds no model (no slow, no parity marker)
test-fast: $(BIN)/.installed lint
	$(BIN)/python -m pytest -m "not slow and not parity and not arm64" -q -n $(TEST_WORKERS) --dist loadfile

## test-arm64: the arm64 package (CPython 3.13) built, imported and answering as an emulated Graviton2, its FP32 gate
## and an int8 artifact's Arm classes (qemu-aarch64; the aarch64 CPython is fetched once, pinned)
test-arm64: $(BIN)/.installed $(QEMU)
	$(BIN)/laya-artifacts aarch64-python
	$(BIN)/laya-artifacts package --arch arm64
	$(BIN)/python -m pytest -m arm64 -n 0 tests/arm64

## test-research: the research wing (research/: the demo head's training, sweeps), outside `make test`
test-research: $(BIN)/.installed
	$(BIN)/mypy -p laya_training
	$(BIN)/python -m pytest research/tests -n $(TEST_WORKERS) --dist loadfile

# As root (CI) apt must succeed; elsewhere, without password-less sudo, the emulated tests skip and say why.
APT_QEMU := apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	qemu-user-static
$(QEMU):
	@if [ "$$(id -u)" = 0 ]; then $(APT_QEMU); \
	elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo -n sh -c '$(APT_QEMU)'; \
	else echo "note: not root and no password-less sudo: $(QEMU) not installed; the emulated AVX2 tests skip"; fi

# The CDK CLI, pinned in infra/package-lock.json.
$(CDK): infra/package.json infra/package-lock.json
	npm ci --prefix infra --no-audit --no-fund --loglevel=error
	touch $@

## layer: build the Lambda layer + function asset for ARCH (x86_64 | arm64) and print their size
layer: $(BIN)/.installed
	$(BIN)/laya-artifacts package --arch $(ARCH)

## synth: the CDK app with the built package; pass context as CDK_ARGS="-c prefix=/laya ..."
synth: layer $(CDK)
	cd infra && PATH="$(CURDIR)/$(BIN):$$PATH" ./node_modules/.bin/cdk synth --quiet -c arch=$(ARCH) $(CDK_ARGS)

## deploy: build and gate the checkpoints, publish them to the bucket (created if absent), cdk deploy, wait for the
## deploy gate, smoke-test the API (docs/deploy.md); CDK_ARGS="-c ..." for the stack, DEPLOY_ARGS for the command
deploy: layer $(CDK)
	$(BIN)/laya-artifacts deploy -c arch=$(ARCH) $(CDK_ARGS) $(DEPLOY_ARGS)

lint: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/mypy
