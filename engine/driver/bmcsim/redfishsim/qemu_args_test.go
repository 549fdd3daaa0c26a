package redfishsim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestQEMUArgsHTTPBoot: a UefiHttp start with the image the firmware
// fetched boots that image first (a read-only CD), then the NIC; without a
// fetched image the NIC is first, and no such drive exists.
func TestQEMUArgsHTTPBoot(t *testing.T) {
	q, err := NewQEMU(QEMUConfig{Dir: t.TempDir(), Disks: []QEMUDisk{{Path: "/vm/disk0.raw"}}, NICs: []QEMUNIC{{MAC: "52:54:00:00:00:01"}}})
	if err != nil {
		t.Fatal(err)
	}
	args, err := q.args(Boot{Target: "UefiHttp", Mode: "Legacy", HTTPBootFile: "/vm/httpboot.img"}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	cmd := strings.Join(args, " ")
	for _, want := range []string{"id=httpboot0,media=cdrom,readonly=on,format=raw,file=/vm/httpboot.img", "ide-cd,drive=httpboot0,id=httpboot,bootindex=1", "mac=52:54:00:00:00:01,bootindex=2"} {
		if !strings.Contains(cmd, want) {
			t.Errorf("qemu args lack %q:\n%s", want, cmd)
		}
	}
	args, _ = q.args(Boot{Target: "UefiHttp", Mode: "Legacy"}, "", "")
	cmd = strings.Join(args, " ")
	if strings.Contains(cmd, "httpboot") || !strings.Contains(cmd, "mac=52:54:00:00:00:01,bootindex=1") {
		t.Errorf("no fetched image: %s", cmd)
	}
}

// TestQEMUArgsSecureBoot: a UEFI start with Secure Boot on boots Debian's
// enforcing firmware (SMM build, flash locked to SMM) with a fresh copy of
// the variable store that has Microsoft's keys; without it, the plain
// firmware; Secure Boot in Legacy mode changes nothing.
func TestQEMUArgsSecureBoot(t *testing.T) {
	dir := t.TempDir()
	code, sCode := dir+"/code.fd", dir+"/secure-code.fd"
	vars, sVars := dir+"/vars.fd", dir+"/ms-vars.fd"
	for p, content := range map[string]string{code: "c", sCode: "sc", vars: "plain-vars", sVars: "ms-vars"} {
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	q, err := NewQEMU(QEMUConfig{Dir: filepath.Join(dir, "vm"), OVMFCode: code, OVMFVars: vars, OVMFSecureCode: sCode, OVMFSecureVars: sVars})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		boot            Boot
		want, wantNot   []string
		varsFrom, label string
	}{
		{Boot{Target: "Hdd", Mode: "UEFI", SecureBoot: true},
			[]string{"q35,smm=on", "driver=cfi.pflash01,property=secure,value=on", "file=" + sCode}, []string{"file=" + code + " "}, "ms-vars", "secure"},
		{Boot{Target: "Hdd", Mode: "UEFI"},
			[]string{"-machine q35 ", "file=" + code}, []string{"smm=on", "property=secure"}, "plain-vars", "plain UEFI"},
		{Boot{Target: "Hdd", Mode: "Legacy", SecureBoot: true},
			[]string{"-machine pc "}, []string{"smm=on", "pflash"}, "", "legacy"},
	} {
		args, err := q.args(tc.boot, "", "")
		if err != nil {
			t.Fatal(err)
		}
		cmd := strings.Join(args, " ") + " "
		for _, w := range tc.want {
			if !strings.Contains(cmd, w) {
				t.Errorf("%s: qemu args lack %q:\n%s", tc.label, w, cmd)
			}
		}
		for _, w := range tc.wantNot {
			if strings.Contains(cmd, w) {
				t.Errorf("%s: qemu args have %q:\n%s", tc.label, w, cmd)
			}
		}
		if tc.varsFrom != "" {
			if got, _ := os.ReadFile(filepath.Join(dir, "vm", "OVMF_VARS.fd")); string(got) != tc.varsFrom {
				t.Errorf("%s: variable store %q, want a copy of %q", tc.label, got, tc.varsFrom)
			}
		}
	}
}
