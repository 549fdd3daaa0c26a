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
# takes a few minutes on 2 idle cores. tests/cli spawns the openstack
# CLI a few hundred times; on a loaded machine that alone passed 20 minutes,
# so the per-package limit leaves room for load rather than fail a slow run.
TESTFLAGS ?= -count=1 -timeout 35m

export CGO_ENABLED := 0

.PHONY: all help build run test test-vmkernel unit deps vet bench states clean tempest

all: build

help:
	@echo "make build   static ./$(BIN) (CGO_ENABLED=0, -trimpath, version $(VERSION))"
	@echo "make web-vendor  the web UI's terminal (xterm.js) from npm into web/static/vendor (make build and make test run it)"
	@echo "make run     build, then ./$(BIN) serve \$$ARGS (127.0.0.1:6385, data in ./castiron-data)"
	@echo "make test    install missing Debian test packages (as root), go mod tidy check, go vet, go test, then make e2e (as root)"
	@echo "make ramdisk build the agent and the PXE ramdisk into castiron-data/ramdisk (needs linux-image-amd64);"
	@echo "             ARCH=arm64: the arm64 one into castiron-data/ramdisk/aarch64 (Debian arm64 packages, fetched)"
	@echo "             RAMDISK_KERNEL=vm: castiron's small kernel for VMs (built from linux-source-6.1, cached; make e2e uses it)"
	@echo "make e2e     end-to-end: real DHCP/TFTP/iPXE boot of qemu VMs behind ipmi_sim (root)"
	@echo "make deb     build/castiron_VERSION_ARCH.deb: binary, castiron.service, /etc/castiron/castiron.yaml, man page"
	@echo "make image   build/castiron-image.tar (docker/podman load) and build/castiron-oci/ (OCI layout): no container daemon needed"
	@echo "make tempest the ironic-tempest-plugin API suite against castiron, three runs (part of make test)"
	@echo "make bench   bench/run.sh: castiron against OpenStack Ironic"
	@echo "make states  the provision state machine as Graphviz (stdout)"
	@echo "make clean   remove build outputs (never ./castiron-data)"

build: web-vendor
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
test: deps vet test-vmkernel unit
	@if [ "$$(id -u)" -eq 0 ]; then $(MAKE) --no-print-directory e2e; \
	else echo "make test: not root, so the end-to-end suite (make e2e) was not run" >&2; fi

# The small VM kernel (RAMDISK_KERNEL=vm), built or taken from its cache
# before the unit tests: ramdisk/initramfs's TestBootQEMU/vm boots it, and
# make e2e uses it. Without its source that subtest skips (fails under CI=true).
test-vmkernel:
	@if [ -f '$(RAMDISK_KERNEL_SRC)' ]; then $(MAKE) --no-print-directory ramdisk-kernel-vm; \
	else echo "make test: no $(RAMDISK_KERNEL_SRC) (apt-get install linux-source-6.1), so the VM kernel is not built" >&2; fi

unit: web-vendor
	$(GO) test -json $(TESTFLAGS) ./... | $(GO) run ./tests/gotest

deps:
	tests/deps.sh

# The web UI's terminal (npm @xterm/xterm, @xterm/addon-fit at the versions
# and hashes of web/vendor-src/package-lock.json) into web/static/vendor,
# embedded and git-ignored; fetched again only when the lock file changes.
# Without npm (outside CI) the build goes on and the Console tab says so.
WEB_VENDOR_STAMP := web/static/vendor/.built
.PHONY: web-vendor
web-vendor: $(WEB_VENDOR_STAMP)
$(WEB_VENDOR_STAMP): web/vendor-src/package-lock.json web/vendor-src/build.sh
	web/vendor-src/build.sh
	@if [ -f web/static/vendor/xterm.mjs ]; then touch $@; fi

# go.mod/go.sum must be what `go mod tidy` writes (-diff prints the change
# and fails instead of writing it).
vet: tools-tidy
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run go mod tidy and commit" >&2; exit 1; }
	$(GO) vet ./...
	$(GO) vet -tags e2e ./tests/e2e/

bench:
	bench/run.sh

# The three ironic-tempest-plugin runs alone (make test runs them with the rest),
# and its rbac_defaults on Keystone auth (skipped unless the installed plugin has
# them or IRONIC_TEMPEST_PLUGIN_DIR names a newer plugin's source; docs/access.md).
tempest: deps
	$(GO) test -count=1 -timeout 30m -v -run 'TestIronicTempestAPI|TestIronicTempestRBAC' ./tests/tempest/

# Only the diagram goes to stdout: make states | dot -Tsvg > states.svg
states:
	@$(GO) run . states --dot

clean:
	rm -rf $(BIN) *.test *.out build/

# ramdisk.mk: `make ramdisk`, castiron's PXE ramdisk. Builds the static agent
# (build/castiron-agent) and, from the host kernel (Debian: linux-image-amd64),
# writes $(RAMDISK_DIR)/vmlinuz and $(RAMDISK_DIR)/initramfs, atomically.
# castiron serve's default --data-dir is ./castiron-data, hence the default.
# Include it from the Makefile (it uses GO and VERSION from there).
#
# RAMDISK_DIR       output directory (default castiron-data/ramdisk)
# RAMDISK_KVER      kernel version (default: newest /boot/vmlinuz-<ver> that has /lib/modules/<ver>)
# RAMDISK_COMPRESS  lz4 (default when the kernel has CONFIG_RD_LZ4, else gzip), gzip, zstd or none
#                   (boot times of each: ramdisk/BOOT-SPEED.md)
# RAMDISK_MODULES   comma-separated modules or sets; a leading + adds to the defaults (e.g. +hv_netvsc).
#                   Default: the drivers of virtual machines (virtio, AHCI) and the agent's own;
#                   full: also the NICs and disk controllers of physical servers (Intel, Broadcom,
#                   Mellanox, Realtek, NVMe, LSI/Broadcom SAS/RAID): make ramdisk RAMDISK_MODULES=full
# RAMDISK_FLAGS     more mkinitramfs flags, e.g. -extra /etc/ssl/certs/ca.pem=ca.pem -v
# RAMDISK_KERNEL    debian (default): the host's Debian kernel (linux-image-amd64: Secure Boot-signed, every
#                   driver as a module; physical servers, with RAMDISK_MODULES=full)
#                   vm: castiron's small kernel for virtual machines, built from Debian's kernel source
#                   (linux-source-6.1) with ramdisk/kernel/vm.config (tinyconfig + VM drivers, all built in, lz4):
#                   faster to boot under emulation; the first build takes minutes, then it is cached in
#                   $(RAMDISK_KERNEL_CACHE)/<hash of the config> (ramdisk/kernel/build.sh).
# RAMDISK_KERNEL_SRC, RAMDISK_KERNEL_CONFIG, RAMDISK_KERNEL_CACHE  the vm kernel's source tarball, config fragment, cache
# SOURCE_DATE_EPOCH if set, the recorded build time: the initramfs is then reproducible byte for byte
# ARCH              amd64 (default: the host's kernel) or arm64: an arm64 agent, Debian's
#                   linux-image-arm64 and network GRUB (grub-efi-arm64-signed) fetched as
#                   foreign-architecture packages (ramdisk/debian/fetch-arch.sh: apt-get download,
#                   dpkg-deb -x; root adds the architecture to apt once) into build/debian-arm64;
#                   output in $(RAMDISK_DIR)/aarch64 (vmlinuz, initramfs, grubnetaa64.efi)

RAMDISK_DIR      ?= castiron-data/ramdisk
RAMDISK_KVER     ?=
RAMDISK_COMPRESS ?=
RAMDISK_MODULES  ?=
RAMDISK_FLAGS    ?=
RAMDISK_KERNEL   ?= debian
RAMDISK_KERNEL_SRC    ?= /usr/src/linux-source-6.1.tar.xz
RAMDISK_KERNEL_CONFIG ?= ramdisk/kernel/vm.config
RAMDISK_KERNEL_CACHE  ?= build/vmkernel
AGENT_BIN        ?= build/castiron-agent
MKINITRAMFS      ?= build/mkinitramfs
# Debian's mdadm (software RAID), unpacked here by ramdisk/debian/fetch-mdadm.sh
MDADM_DIR        ?= build/mdadm
ARCH             ?= amd64
ramdisk_args      = $(strip $(if $(RAMDISK_COMPRESS),-compress $(RAMDISK_COMPRESS)) $(if $(RAMDISK_KVER),-kver $(RAMDISK_KVER)) \
                    $(if $(RAMDISK_MODULES),-modules '$(RAMDISK_MODULES)') $(RAMDISK_FLAGS))

.PHONY: ramdisk ramdisk-amd64 ramdisk-arm64 ramdisk-agent ramdisk-kernel ramdisk-kernel-vm ramdisk-kernel-debian ramdisk-mkinitramfs

ramdisk: ramdisk-$(ARCH)

# With RAMDISK_KERNEL=vm the kernel comes from the cache entry ramdisk-kernel
# names in $(RAMDISK_KERNEL_CACHE)/selected.
ramdisk-amd64: ramdisk-kernel ramdisk-agent ramdisk-mkinitramfs
	kargs=(); if [ '$(RAMDISK_KERNEL)' = vm ]; then \
		kdir=$$(cat $(RAMDISK_KERNEL_CACHE)/selected); \
		kargs=(-kver "$$(cat "$$kdir/kver")" -boot-dir "$$kdir/boot" -modules-root "$$kdir/lib/modules"); \
	fi; \
	mdargs=$$(ramdisk/debian/fetch-mdadm.sh $(MDADM_DIR)) || { echo "make ramdisk: no mdadm from Debian: this ramdisk cannot build software RAID" >&2; mdargs=; }; \
	$(MKINITRAMFS) -agent $(AGENT_BIN) -agent-version '$(VERSION)' -out $(RAMDISK_DIR) "$${kargs[@]}" $$mdargs $(ramdisk_args)

ramdisk-mkinitramfs:
	CGO_ENABLED=0 $(GO) build -trimpath -o $(MKINITRAMFS) ./ramdisk/initramfs/mkinitramfs

# arm64: castiron serves $(RAMDISK_DIR)/aarch64 to nodes that boot as arm64
# (DHCP architecture 11, or cpu_arch aarch64); GRUB is their boot loader
# (Debian has no arm64 iPXE).
ARM64_DEBIAN ?= build/debian-arm64
ramdisk-arm64: ramdisk-mkinitramfs
	@mkdir -p $(dir $(AGENT_BIN)) $(RAMDISK_DIR)/aarch64
	CGO_ENABLED=0 GOARCH=arm64 $(GO) build -trimpath -ldflags '-s -w -X main.version=$(VERSION)' -o $(AGENT_BIN)-arm64 ./ramdisk/agent
	kver=$$(ramdisk/debian/fetch-arch.sh arm64 $(ARM64_DEBIAN)); \
	$(MKINITRAMFS) -agent $(AGENT_BIN)-arm64 -agent-version '$(VERSION)' -out $(RAMDISK_DIR)/aarch64 -iso-loaders=false \
		-kver "$$kver" -boot-dir $(ARM64_DEBIAN)/root/boot -modules-root $(ARM64_DEBIAN)/root/lib/modules $(ramdisk_args)
	cp $(ARM64_DEBIAN)/root/usr/lib/grub/arm64-efi-signed/grubnetaa64.efi.signed $(RAMDISK_DIR)/aarch64/grubnetaa64.efi.tmp
	mv $(RAMDISK_DIR)/aarch64/grubnetaa64.efi.tmp $(RAMDISK_DIR)/aarch64/grubnetaa64.efi

# -trimpath drops -ldflags from the binary's build info, so mkinitramfs gets
# the version from -agent-version above.
ramdisk-agent:
	@mkdir -p $(dir $(AGENT_BIN))
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w -X main.version=$(VERSION)' -o $(AGENT_BIN) ./ramdisk/agent

# Runs first, so a host without a kernel gets one clear line and no build.
# (A recipe, not a prerequisite: make e2e sets RAMDISK_KERNEL per target.)
ramdisk-kernel:
	@$(MAKE) --no-print-directory ramdisk-kernel-$(RAMDISK_KERNEL) RAMDISK_KERNEL=$(RAMDISK_KERNEL)

# The small VM kernel: built once per config (minutes), then cached.
ramdisk-kernel-vm:
	@mkdir -p $(RAMDISK_KERNEL_CACHE)
	ramdisk/kernel/build.sh $(RAMDISK_KERNEL_CONFIG) $(RAMDISK_KERNEL_SRC) $(RAMDISK_KERNEL_CACHE) > $(RAMDISK_KERNEL_CACHE)/selected.tmp
	mv $(RAMDISK_KERNEL_CACHE)/selected.tmp $(RAMDISK_KERNEL_CACHE)/selected

ramdisk-kernel-%:
	@echo "make ramdisk: RAMDISK_KERNEL=$* is not a kernel (want debian or vm)" >&2; exit 1

ramdisk-kernel-debian:
	@kver='$(RAMDISK_KVER)'; \
	if [ -n "$$kver" ]; then set -- "/boot/vmlinuz-$$kver"; else set -- /boot/vmlinuz-*; fi; \
	for k in "$$@"; do \
		[ -f "$$k" ] && [ -f "/lib/modules/$${k#/boot/vmlinuz-}/modules.dep" ] && exit 0; \
	done; \
	echo "make ramdisk: no kernel $${kver:+$$kver }with modules (/boot/vmlinuz-<ver> and /lib/modules/<ver>/modules.dep);" \
		"install one: apt-get install linux-image-amd64" >&2; \
	exit 1

# e2e.mk: `make e2e`, castiron's end-to-end suite (tests/e2e, build tag e2e).
# Include it from the Makefile (`include /path/to/e2e.mk`, or paste it in);
# `ramdisk` is defined elsewhere and writes castiron-data/ramdisk/{vmlinuz,initramfs*}.
#
# Every test builds its own network namespace (10.205.0.0/16 inside it only),
# bridge and taps, runs ipmi_sim + castiron in it and PXE-boots a qemu VM (TCG),
# so it needs root. E2EFLAGS adds go test flags, e.g. make e2e E2EFLAGS='-run Smoke'.
# Environment the tests read: CASTIRON_BIN, CASTIRON_RAMDISK_DIR, E2E_KEEP=1|always,
# E2E_PORTLESS=1, E2E_ARM64=1 (TestInspectArm64; make e2e and make e2e-arm64 set it), CI=true (missing tools fail instead of skipping).

E2EFLAGS ?=
# The x86 VMs of make e2e boot the small VM kernel (RAMDISK_KERNEL=vm, built
# from linux-source-6.1 and cached): the kernel made for them, which boots
# in a fraction of the time of Debian's under TCG (ramdisk/BOOT-SPEED.md).
# The arm64 VM boots Debian's arm64 kernel with its modules, so the agent's
# module loading (the physical-server path) stays covered end to end, and
# TestBootQEMU boots Debian's amd64 kernel with the default modules.
# make e2e E2E_RAMDISK_KERNEL=debian: Debian's kernel for the x86 VMs too.
E2E_RAMDISK_KERNEL ?= vm
e2e e2e-arm64: RAMDISK_KERNEL = $(E2E_RAMDISK_KERNEL)

.PHONY: e2e e2e-root e2e-arm64

# make e2e includes the arm64 VM (E2E_ARM64=1, the arm64 ramdisk: ~1.5 min
# of test, the first arm64 ramdisk build also downloads ~61 MB of Debian
# packages); make e2e-arm64 runs that test alone.
e2e: e2e-root ramdisk
	$(MAKE) --no-print-directory ramdisk ARCH=arm64
	E2E_ARM64=1 $(GO) test -tags e2e -count=1 -timeout 40m -json $(E2EFLAGS) ./tests/e2e/ | $(GO) run ./tests/gotest

# The arm64 VM (qemu-system-aarch64, TCG) inspected through network GRUB.
e2e-arm64: e2e-root ramdisk
	$(MAKE) --no-print-directory ramdisk ARCH=arm64
	E2E_ARM64=1 $(GO) test -tags e2e -count=1 -timeout 40m -json -run 'TestInspectArm64$$' $(E2EFLAGS) ./tests/e2e/ | $(GO) run ./tests/gotest

# Listed before ramdisk so a non-root run stops before building anything.
e2e-root:
	@if [ "$$(id -u)" -ne 0 ]; then \
		echo "make e2e: needs root (network namespaces, taps, qemu, ipmi_sim); run: sudo make e2e" >&2; \
		exit 1; \
	fi

# `make deb` and `make image`. The packagers are Go
# programs in tools/ (their own module, so that nfpm's and
# go-containerregistry's dependencies stay out of castiron's go.mod).
#
# DEB_ARCH           Go/Debian architecture (default: go env GOARCH)
# DEB_VERSION        package version (default: 0~gitYYYYMMDDhhmmss.HASH of HEAD,
#                    or the version of a vX.Y.Z tag)
# SOURCE_DATE_EPOCH  file times in the package (default: HEAD's commit time)

DEB_ARCH          ?= $(shell $(GO) env GOARCH)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || date +%s)
DEB_VERSION       ?= $(shell packaging/version.sh $(SOURCE_DATE_EPOCH))
PKG_DIR           := build/pkg

.PHONY: deb image pkg-stage tools-tidy

# The binary for DEB_ARCH, and, from the host's build, the default
# configuration (every key at its default, data in /var/lib/castiron) and
# the man page (the binary's own help).
pkg-stage: build
	@mkdir -p $(PKG_DIR)
	GOARCH=$(DEB_ARCH) $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(PKG_DIR)/castiron .
	./$(BIN) config --data-dir /var/lib/castiron > $(PKG_DIR)/castiron.yaml
	packaging/manpage.sh ./$(BIN) '$(VERSION)' "$$(date -u -d @$(SOURCE_DATE_EPOCH) +%Y-%m-%d)" | gzip -9n > $(PKG_DIR)/castiron.1.gz

deb: pkg-stage
	$(GO) -C tools build -trimpath -o ../build/mkdeb ./mkdeb
	DEB_ARCH=$(DEB_ARCH) DEB_VERSION='$(DEB_VERSION)' SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) build/mkdeb -config packaging/nfpm.yaml -out build
	@ls -l build/castiron_$(DEB_VERSION)_$(DEB_ARCH).deb

# The OCI image: the same binary and default configuration, iPXE from
# IMAGE_IPXE_DIR (empty: none), run as uid 65532. IMAGE_FLAGS: more mkimage flags.
IMAGE_IPXE_DIR ?= /usr/lib/ipxe
IMAGE_FLAGS    ?=

image: pkg-stage
	$(GO) -C tools build -trimpath -o ../build/mkimage ./mkimage
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) build/mkimage -binary $(PKG_DIR)/castiron -config $(PKG_DIR)/castiron.yaml \
		-version '$(VERSION)' -arch $(DEB_ARCH) -ipxe-dir '$(IMAGE_IPXE_DIR)' \
		-tar build/castiron-image.tar -layout build/castiron-oci $(IMAGE_FLAGS)
	@ls -l build/castiron-image.tar

# tools/ is its own module: the same tidiness rule as go.mod (-e: nfpm's own
# tests import rpm/msix modules the proxy does not serve; nothing here builds them).
tools-tidy:
	@$(GO) -C tools mod tidy -e -diff || { echo "tools/go.mod/go.sum are not tidy: cd tools && go mod tidy -e" >&2; exit 1; }
	$(GO) -C tools vet ./...
