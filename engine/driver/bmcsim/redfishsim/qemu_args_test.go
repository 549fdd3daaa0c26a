package redfishsim

import (
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
