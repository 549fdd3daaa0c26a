package pkg

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// imageConfig is what the test reads of the image's config blob (OCI image
// spec, config.config).
type imageConfig struct {
	Architecture, OS string
	Config           struct {
		User, WorkingDir string
		Entrypoint, Cmd  []string
		Env              []string
	} `json:"config"`
}

// TestImage builds the OCI image with make image, unpacks the archive the
// way a container runtime does (manifest.json, config, layers in order) with
// no go-containerregistry code, and runs its entrypoint in the unpacked root
// (chroot) as the image's user with the image's environment: the API
// answers and the database is the image user's.
func TestImage(t *testing.T) {
	need(t, true, "make")
	archive := makeOutput(t, "image")
	st, err := os.Stat(archive)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %.1f MB", filepath.Base(archive), float64(st.Size())/1e6)

	rootfs := t.TempDir()
	if err := os.Chmod(rootfs, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg, configDigest := unpackImage(t, archive, rootfs)
	checkLayout(t, filepath.Join(filepath.Dir(archive), "castiron-oci"), configDigest)
	c := cfg.Config
	if cfg.OS != "linux" || cfg.Architecture == "" || len(c.Entrypoint) == 0 {
		t.Fatalf("image config: %+v", cfg)
	}
	var uid, gid int
	if _, err := fmt.Sscanf(c.User, "%d:%d", &uid, &gid); err != nil || uid == 0 {
		t.Fatalf("image user %q: want a numeric non-root uid:gid", c.User)
	}

	port := freePort(t)
	argv := append(append([]string{}, c.Entrypoint...), c.Cmd...)
	cmd := exec.Command(argv[0], argv[1:]...)
	// The image's environment, and the API on a free loopback port (the
	// image's 127.0.0.1:6385 may be taken on a shared machine).
	cmd.Env = append(append([]string{}, c.Env...), fmt.Sprintf("CASTIRON_LISTEN=127.0.0.1:%d", port))
	cmd.Dir = c.WorkingDir
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Chroot:     rootfs,
		Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)},
	}
	logf, err := os.Create(filepath.Join(t.TempDir(), "serve.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("entrypoint %v: %v", argv, err)
	}
	var waitErr error
	done := make(chan struct{}) // closed when the process ended, waitErr set
	go func() { waitErr = cmd.Wait(); close(done) }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
			if waitErr != nil {
				t.Errorf("entrypoint did not stop cleanly on SIGTERM: %v", waitErr)
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Error("entrypoint still running 30 s after SIGTERM")
		}
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("castiron's log:\n%s", b)
		}
	}()

	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitHealthy(t, base+"/healthz", done, &waitErr)
	for _, path := range []string{"/readyz", "/v1/"} {
		if code, body := get(t, base+path); code != 200 {
			t.Fatalf("GET %s: %d %s", path, code, body)
		}
	}
	req, _ := http.NewRequest("POST", base+"/v1/nodes", strings.NewReader(`{"driver":"fake-hardware","name":"imagetest"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-OpenStack-Ironic-API-Version", "latest")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 201 || !strings.Contains(string(body), `"imagetest"`) {
		t.Fatalf("POST /v1/nodes: %d %s", resp.StatusCode, body)
	}
	db, err := os.Stat(filepath.Join(rootfs, c.WorkingDir, "castiron.db"))
	if err != nil {
		t.Fatalf("no database in the image's data dir: %v", err)
	}
	if owner := db.Sys().(*syscall.Stat_t).Uid; owner != uint32(uid) {
		t.Errorf("castiron.db belongs to uid %d, want the image user %d", owner, uid)
	}
	t.Logf("entrypoint %v as %s in the unpacked image: /healthz, /readyz, /v1/, POST /v1/nodes answer", argv, c.User)
}

// unpackImage reads a docker/podman-load archive: manifest.json names the
// config blob and the layers, which are applied in order into rootfs with
// their modes and owners. It returns the config and its digest.
func unpackImage(t *testing.T, archive, rootfs string) (imageConfig, string) {
	t.Helper()
	blobs := t.TempDir()
	if err := extractTar(archive, blobs, false); err != nil {
		t.Fatalf("archive: %v", err)
	}
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	readJSON(t, filepath.Join(blobs, "manifest.json"), &manifest)
	if len(manifest) != 1 || len(manifest[0].Layers) == 0 || len(manifest[0].RepoTags) != 1 {
		t.Fatalf("manifest.json: %+v", manifest)
	}
	m := manifest[0]
	t.Logf("image %s: %d layer(s)", m.RepoTags[0], len(m.Layers))
	var cfg imageConfig
	readJSON(t, filepath.Join(blobs, m.Config), &cfg)
	for _, l := range m.Layers {
		if err := extractTar(filepath.Join(blobs, l), rootfs, true); err != nil {
			t.Fatalf("layer %s: %v", l, err)
		}
	}
	return cfg, strings.TrimPrefix(m.Config, "sha256:")
}

// checkLayout finds, through the OCI layout's index.json and the image
// manifest it points to, the same config blob as the archive's.
func checkLayout(t *testing.T, dir, configDigest string) {
	t.Helper()
	var index struct {
		Manifests []struct{ Digest string }
	}
	readJSON(t, filepath.Join(dir, "index.json"), &index)
	if len(index.Manifests) != 1 {
		t.Fatalf("OCI layout index.json: %+v", index)
	}
	var manifest struct {
		MediaType string
		Config    struct{ Digest string }
	}
	readJSON(t, filepath.Join(dir, "blobs", strings.Replace(index.Manifests[0].Digest, ":", "/", 1)), &manifest)
	if manifest.MediaType != "application/vnd.oci.image.manifest.v1+json" || manifest.Config.Digest != "sha256:"+configDigest {
		t.Fatalf("OCI layout manifest %+v, want an OCI manifest of config sha256:%s", manifest, configDigest)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// extractTar unpacks a tar (gzip-compressed when layer is set) into dir;
// entries with .. or absolute paths are refused.
func extractTar(path, dir string, layer bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var r io.Reader = f
	if layer {
		zr, err := gzip.NewReader(f)
		if err != nil {
			return err
		}
		r = zr
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Clean(h.Name)
		if filepath.IsAbs(name) || strings.HasPrefix(name, "..") {
			return fmt.Errorf("entry %q leaves the root", h.Name)
		}
		dst := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(out, tr)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		default:
			return fmt.Errorf("entry %q: type %c not expected in this image", h.Name, h.Typeflag)
		}
		if layer {
			if err := os.Lchown(dst, h.Uid, h.Gid); err != nil {
				return err
			}
		}
		if err := os.Chmod(dst, os.FileMode(h.Mode).Perm()|modeBits(h.Mode)); err != nil {
			return err
		}
	}
}

// modeBits maps tar's setuid/setgid/sticky bits to os.FileMode's.
func modeBits(m int64) os.FileMode {
	var fm os.FileMode
	if m&0o4000 != 0 {
		fm |= os.ModeSetuid
	}
	if m&0o2000 != 0 {
		fm |= os.ModeSetgid
	}
	if m&0o1000 != 0 {
		fm |= os.ModeSticky
	}
	return fm
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitHealthy polls url until it answers 200, failing if the process ends.
func waitHealthy(t *testing.T, url string, done <-chan struct{}, waitErr *error) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			t.Fatalf("entrypoint exited: %v", *waitErr)
		default:
		}
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s did not answer 200 within 60 s", url)
}
