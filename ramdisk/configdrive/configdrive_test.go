package configdrive

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// needTool skips when a tool is missing, except in CI where it fails.
func needTool(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is required in CI: %v", name, err)
		}
		t.Skipf("%s not installed", name)
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		in      any
		want    string // "contents", "url", "image", "none"
		wantErr string
	}{
		{"nil", nil, "none", ""},
		{"empty string", "", "none", ""},
		{"url", "http://10.0.0.1/cd.iso.gz", "url", ""},
		{"base64 with newlines", "H4sIAAAA\nAAAA==\n", "image", ""},
		{"not base64", "hello, world", "", "Invalid configdrive format: it is neither a JSON, nor a URL, nor a base64 string"},
		{"object", map[string]any{"meta_data": map[string]any{"a": 1.0}, "user_data": "#!/bin/sh", "network_data": map[string]any{}, "vendor_data": map[string]any{}}, "contents", ""},
		{"user_data array", map[string]any{"user_data": []any{1.0}}, "contents", ""},
		{"user_data null", map[string]any{"user_data": nil}, "contents", ""},
		{"unknown key", map[string]any{"meta_data": map[string]any{}, "extra": 1.0}, "", "Invalid configdrive format: Additional properties are not allowed ('extra' was unexpected)"},
		{"meta_data string", map[string]any{"meta_data": "x"}, "", "Invalid configdrive format: 'x' is not of type 'object'"},
		{"user_data number", map[string]any{"user_data": 5.0}, "", "Invalid configdrive format: 5 is not of type 'object', 'array', 'string', 'null'"},
		{"number", 5.0, "", "Invalid configdrive format: 5 is not valid under any of the given schemas"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cd, err := Parse(tc.in)
			if tc.wantErr != "" {
				var ie *InvalidError
				if !errors.As(err, &ie) || err.Error() != tc.wantErr {
					t.Fatalf("want %q, got %v", tc.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := "none"
			switch {
			case cd.Contents != nil:
				got = "contents"
			case cd.URL != "":
				got = "url"
			case cd.Image != "":
				got = "image"
			}
			if got != tc.want {
				t.Fatalf("want %s, got %+v", tc.want, cd)
			}
		})
	}
}

// isoFile reads a file from an image with isoinfo, by Rock Ridge (-R) or
// Joliet (-J) name.
func isoFile(t *testing.T, iso []byte, ext, name string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "cd.iso")
	if err := os.WriteFile(p, iso, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("isoinfo", ext, "-i", p, "-x", name).Output()
	if err != nil {
		t.Fatalf("isoinfo %s -x %s: %v", ext, name, err)
	}
	return string(out)
}

func isoListing(t *testing.T, iso []byte, ext string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "cd.iso")
	if err := os.WriteFile(p, iso, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("isoinfo", ext, "-l", "-i", p).CombinedOutput()
	if err != nil {
		t.Fatalf("isoinfo %s -l: %v\n%s", ext, err, out)
	}
	return string(out)
}

func TestBuild(t *testing.T) {
	needTool(t, "isoinfo")
	t.Setenv("TMPDIR", t.TempDir()) // to see that nothing is left behind
	meta := map[string]any{"uuid": "1be26c0b-03f2-4d2e-ae87-c02d7f33c123", "hostname": "node-1", "public_keys": map[string]any{"k": "ssh-ed25519 AAAA <x@y>"}}
	network := map[string]any{"links": []any{map[string]any{"id": "eth0", "type": "phy"}}}
	iso, err := Build(meta, "#cloud-config\nhostname: node-1\n", network, map[string]any{"vendor": true})
	if err != nil {
		t.Fatal(err)
	}
	if len(iso)%2048 != 0 || len(iso) < 32768+2048 {
		t.Fatalf("image of %d bytes", len(iso))
	}
	if got := strings.TrimRight(string(iso[32768+40:32768+72]), " "); got != Label {
		t.Fatalf("volume label %q", got)
	}
	for _, ext := range []string{"-R", "-J"} {
		listing := isoListing(t, iso, ext)
		for _, dir := range []string{"2012-08-10", "latest"} {
			if !strings.Contains(listing, "Directory listing of /openstack/"+dir+"/") {
				t.Fatalf("%s: no openstack/%s in\n%s", ext, dir, listing)
			}
			for _, f := range []string{"meta_data.json", "network_data.json", "vendor_data2.json", "user_data"} {
				if !strings.Contains(listing, " "+f+" ") {
					t.Fatalf("%s: no %s in\n%s", ext, f, listing)
				}
			}
			var got map[string]any
			if err := json.Unmarshal([]byte(isoFile(t, iso, ext, "/openstack/"+dir+"/meta_data.json")), &got); err != nil {
				t.Fatal(err)
			}
			if got["hostname"] != "node-1" || got["public_keys"].(map[string]any)["k"] != "ssh-ed25519 AAAA <x@y>" {
				t.Fatalf("%s meta_data %v", ext, got)
			}
			if ud := isoFile(t, iso, ext, "/openstack/"+dir+"/user_data"); ud != "#cloud-config\nhostname: node-1\n" {
				t.Fatalf("%s user_data %q", ext, ud)
			}
		}
	}
	left, _ := os.ReadDir(os.Getenv("TMPDIR"))
	if len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

func TestBuildOptionalFiles(t *testing.T) {
	needTool(t, "isoinfo")
	iso, err := Build(nil, map[string]any{"ignition": map[string]any{"version": "3.0.0"}}, nil, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	listing := isoListing(t, iso, "-R")
	if strings.Contains(listing, "network_data.json") || strings.Contains(listing, "vendor_data2.json") {
		t.Fatalf("empty network/vendor data written:\n%s", listing)
	}
	if got := isoFile(t, iso, "-R", "/openstack/latest/meta_data.json"); got != "{}" {
		t.Fatalf("meta_data %q", got)
	}
	if got := isoFile(t, iso, "-R", "/openstack/latest/user_data"); got != `{"ignition":{"version":"3.0.0"}}` {
		t.Fatalf("user_data %q", got)
	}
}

func TestAgentArgDefaults(t *testing.T) {
	needTool(t, "isoinfo")
	cd, err := Parse(map[string]any{"meta_data": map[string]any{"name": "given"}})
	if err != nil {
		t.Fatal(err)
	}
	enc, err := cd.AgentArg("uuid-1", "node-name")
	if err != nil {
		t.Fatal(err)
	}
	iso, err := Decode([]byte(enc))
	if err != nil {
		t.Fatal(err)
	}
	var meta map[string]any
	if err := json.Unmarshal([]byte(isoFile(t, iso, "-R", "/openstack/latest/meta_data.json")), &meta); err != nil {
		t.Fatal(err)
	}
	if meta["uuid"] != "uuid-1" || meta["name"] != "given" {
		t.Fatalf("meta_data %v", meta)
	}
	for _, s := range []ConfigDrive{{URL: "http://x/y"}, {Image: "abc="}} {
		if got, _ := s.AgentArg("u", "n"); got != s.URL+s.Image {
			t.Fatalf("AgentArg(%+v) = %q", s, got)
		}
	}
}

func TestDecode(t *testing.T) {
	iso := bytes.Repeat([]byte{0}, 40960)
	copy(iso[32769:], "CD001")
	enc, err := Encode(iso)
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(bytes.Repeat([]byte{1}, MaxSize+1))
	zw.Close()
	tests := []struct {
		name    string
		in      []byte
		wantErr bool
	}{
		{"gzip base64", []byte(enc), false},
		{"wrapped lines", []byte(enc[:20] + "\n" + enc[20:] + "\r\n"), false},
		{"base64 of a bare image", []byte(base64.StdEncoding.EncodeToString(iso)), false},
		{"bare image from a URL", iso, false},
		{"empty", nil, true},
		{"garbage", []byte("not an image at all"), true},
		{"too large", []byte(base64.StdEncoding.EncodeToString(gz.Bytes())), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Decode(tc.in)
			if tc.wantErr {
				if err == nil {
					t.Fatal("want an error")
				}
				return
			}
			if err != nil || !bytes.Equal(got, iso) {
				t.Fatalf("Decode: %v (%d bytes)", err, len(got))
			}
		})
	}
}

// TestMount mounts the image as cloud-init does (by kernel, lowercase
// names). Needs root and a kernel with ISO 9660 support.
func TestMount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	fs, _ := os.ReadFile("/proc/filesystems")
	if !bytes.Contains(fs, []byte("iso9660")) && exec.Command("modprobe", "isofs").Run() != nil {
		// A property of the host kernel, not a missing package (this
		// machine's kernel has none): TestBuild reads the image
		// with isoinfo instead.
		t.Skip("the kernel has no iso9660 support")
	}
	iso, err := Build(map[string]any{"uuid": "u"}, "data", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	img := filepath.Join(dir, "cd.iso")
	mnt := filepath.Join(dir, "mnt")
	os.WriteFile(img, iso, 0o644)
	os.Mkdir(mnt, 0o755)
	if out, err := exec.Command("mount", "-o", "loop,ro", img, mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount: %v %s", err, out)
	}
	defer exec.Command("umount", mnt).Run()
	got, err := os.ReadFile(filepath.Join(mnt, "openstack/latest/meta_data.json"))
	if err != nil || string(got) != `{"uuid":"u"}` {
		t.Fatalf("meta_data.json: %q %v", got, err)
	}
}
