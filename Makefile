# castiron: one static binary. `make help` lists the targets.

SHELL       := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

GO       ?= go
BIN      ?= castiron
VERSION  ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X main.version=$(VERSION)
# Arguments for `make run`, e.g. make run ARGS="--listen 127.0.0.1:6390".
ARGS     ?=
# go test flags; the whole suite (openstack CLI, kill -9 recovery, ipmi_sim)
# takes a few minutes on 2 cores.
TESTFLAGS ?= -count=1 -timeout 20m

export CGO_ENABLED := 0

.PHONY: all help build run test deps vet bench states clean

all: build

help:
	@echo "make build   static ./$(BIN) (CGO_ENABLED=0, -trimpath, version $(VERSION))"
	@echo "make run     build, then ./$(BIN) serve \$$ARGS (127.0.0.1:6385, data in ./castiron-data)"
	@echo "make test    install missing Debian test packages (as root), go vet, go test"
	@echo "make bench   bench/run.sh: castiron against OpenStack Ironic"
	@echo "make states  the provision state machine as Graphviz (stdout)"
	@echo "make clean   remove build outputs (never ./castiron-data)"

build:
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) .
	@if command -v file >/dev/null; then \
		file $(BIN); \
		file $(BIN) | grep -q 'statically linked' || { echo "$(BIN) is not statically linked" >&2; exit 1; }; \
	fi

run: build
	./$(BIN) serve $(ARGS)

# The README's test command. tests/deps.sh installs what is missing (root
# only); tests/gotest turns `go test -json` back into go test's usual output
# and ends with the pass/fail/skip counts.
test: deps vet
	$(GO) test -json $(TESTFLAGS) ./... | $(GO) run ./tests/gotest

deps:
	tests/deps.sh

vet:
	$(GO) vet ./...

bench:
	bench/run.sh

# Only the diagram goes to stdout: make states | dot -Tsvg > states.svg
states:
	@$(GO) run . states --dot

clean:
	rm -f $(BIN) *.test *.out
