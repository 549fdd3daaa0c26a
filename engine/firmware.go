package engine

import (
	"context"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"castiron/engine/driver"
	"castiron/engine/jsonschema"
	"castiron/fault"
	"castiron/storage"
)

// FirmwareConfig is where firmware images are staged: castiron downloads
// each image of a firmware.update step, checks its checksum, and hands the
// BMC a URL of its own (Ironic's [redfish]firmware_source = local), so a
// BMC on the provisioning network never needs the image's origin.
type FirmwareConfig struct {
	// Dir holds the staged images; BaseURL is Dir as BMCs reach it.
	Dir     string
	BaseURL string
	// HTTPClient downloads the images [a client with no proxy; the
	// step's context bounds each download].
	HTTPClient *http.Client
	// MaxImage bounds one image [4 GiB].
	MaxImage int64
}

func (f *FirmwareConfig) client() *http.Client {
	if f != nil && f.HTTPClient != nil {
		return f.HTTPClient
	}
	return &http.Client{Transport: &http.Transport{Proxy: nil}}
}

func (f *FirmwareConfig) maxImage() int64 {
	if f != nil && f.MaxImage > 0 {
		return f.MaxImage
	}
	return 4 << 30
}

// firmwareSettingsSchema is Ironic's _FIRMWARE_INTERFACE_UPDATE_SCHEMA
// plus castiron's optional checksum ("sha256:<hex>", or bare hex whose
// length names the algorithm), which Ironic's schema has no room for.
var firmwareSettingsSchema = func() *jsonschema.Schema {
	item := jsonschema.Object(true, []string{"component", "url"},
		jsonschema.P("component", &jsonschema.Schema{Types: []string{"string"}, AnyOf: []*jsonschema.Schema{
			{Enum: []string{driver.FirmwareBIOS, driver.FirmwareBMC}},
			{Pattern: jsonschema.LazyPattern("^" + driver.FirmwareNICPrefix + ".*"), PatternSrc: "^" + driver.FirmwareNICPrefix + ".*"}}}),
		jsonschema.P("url", &jsonschema.Schema{Types: []string{"string"}, MinLength: 1}),
		jsonschema.P("wait", &jsonschema.Schema{Types: []string{"integer"}, Minimum: jsonschema.Int64(1)}),
		jsonschema.P("checksum", &jsonschema.Schema{Types: []string{"string"}, MinLength: 1}),
	)
	return &jsonschema.Schema{Types: []string{"array"}, Items: item, MinItems: 1}
}()

// firmwareUpdate is one entry of the update step's settings.
type firmwareUpdate struct {
	Component, URL, Checksum string
	Wait                     int // seconds to let the BMC settle after the update
}

// parseFirmwareSettings is Ironic's validate_firmware_interface_update_args.
func parseFirmwareSettings(v any) ([]firmwareUpdate, error) {
	if msg := jsonschema.Message(firmwareSettingsSchema, v); msg != "" {
		return nil, fault.New(fault.Invalid, "Invalid firmware update %s. Errors: %s", pyRepr(v), msg)
	}
	var out []firmwareUpdate
	for _, s := range v.([]any) {
		m := s.(map[string]any)
		u := firmwareUpdate{}
		u.Component, _ = m["component"].(string)
		u.URL, _ = m["url"].(string)
		u.Checksum, _ = m["checksum"].(string)
		u.Wait = intOf(m["wait"])
		if _, _, err := checksumOf(u.Checksum); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

// checksumOf splits "algo:hex" (or bare hex, the algorithm told by its
// length) into a hash and the expected digest; "" means no check.
func checksumOf(sum string) (func() hash.Hash, string, error) {
	if sum == "" {
		return nil, "", nil
	}
	algo, hexsum, ok := strings.Cut(strings.ToLower(strings.TrimSpace(sum)), ":")
	if !ok {
		hexsum = algo
		algo = map[int]string{32: "md5", 40: "sha1", 64: "sha256", 128: "sha512"}[len(hexsum)]
	}
	newHash := map[string]func() hash.Hash{"md5": md5.New, "sha1": sha1.New, "sha256": sha256.New, "sha512": sha512.New}[algo]
	if newHash == nil {
		return nil, "", fault.New(fault.Invalid, "Invalid firmware checksum %q: want sha256:<hex>, sha512:<hex>, sha1:<hex> or md5:<hex>", sum)
	}
	if _, err := hex.DecodeString(hexsum); err != nil || len(hexsum) != 2*newHash().Size() {
		return nil, "", fault.New(fault.Invalid, "Invalid firmware checksum %q: not a %s digest", sum, algo)
	}
	return newHash, hexsum, nil
}

// stagedImage is a downloaded, verified image.
type stagedImage struct {
	path string // "" when not staged (no FirmwareConfig.Dir)
	url  string // what the BMC fetches
	size int64
}

// stageFirmware downloads u's image (an http(s) URL, or the name of an
// image castiron hosts), verifies its checksum and, with a staging
// directory, keeps it there for the BMC to fetch from castiron. Without
// one the BMC gets the original URL (after the check, when there is a
// checksum).
func (c *Conductor) stageFirmware(ctx context.Context, nodeUUID string, u firmwareUpdate) (stagedImage, error) {
	src, err := c.imageURL(u.URL)
	if err != nil {
		return stagedImage{}, fault.New(fault.Invalid, "Firmware image for %s: %v", u.Component, err)
	}
	fc := c.cfg.Firmware
	staging := fc != nil && fc.Dir != "" && fc.BaseURL != ""
	newHash, want, err := checksumOf(u.Checksum)
	if err != nil {
		return stagedImage{}, err
	}
	if !staging && newHash == nil {
		return stagedImage{url: src}, nil
	}
	dir := os.TempDir()
	if staging {
		dir = fc.Dir
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return stagedImage{}, fmt.Errorf("firmware staging directory: %w", err)
		}
		sweepStaged(dir, 24*time.Hour)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
	if err != nil {
		return stagedImage{}, fault.New(fault.Invalid, "Firmware image URL %q: %v", src, err)
	}
	resp, err := fc.client().Do(req)
	if err != nil {
		return stagedImage{}, fmt.Errorf("downloading firmware image %s for %s failed: %w", redactURL(src), u.Component, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return stagedImage{}, fmt.Errorf("downloading firmware image %s for %s failed: HTTP %d", redactURL(src), u.Component, resp.StatusCode)
	}
	f, err := os.CreateTemp(dir, nodeUUID+"-*.part")
	if err != nil {
		return stagedImage{}, fmt.Errorf("firmware staging: %w", err)
	}
	keep := false
	defer func() {
		if !keep {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	var w io.Writer = f
	var h hash.Hash
	if newHash != nil {
		h = newHash()
		w = io.MultiWriter(f, h)
	}
	limit := fc.maxImage()
	n, err := io.Copy(w, io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return stagedImage{}, fmt.Errorf("downloading firmware image %s for %s failed: %w", redactURL(src), u.Component, err)
	}
	if n > limit {
		return stagedImage{}, fault.New(fault.Invalid, "Firmware image %s for %s is larger than %d bytes", redactURL(src), u.Component, limit)
	}
	if h != nil {
		if got := hex.EncodeToString(h.Sum(nil)); got != want {
			return stagedImage{}, fault.New(fault.Invalid, "Firmware image %s for %s has checksum %s, expected %s: not handed to the BMC", redactURL(src), u.Component, got, want)
		}
	}
	if err := f.Close(); err != nil {
		return stagedImage{}, fmt.Errorf("firmware staging: %w", err)
	}
	if !staging {
		return stagedImage{url: src, size: n}, nil
	}
	// An unguessable name: the staging directory is served without
	// authentication, as the BMC fetches without credentials.
	var rnd [12]byte
	_, _ = rand.Read(rnd[:])
	final := filepath.Join(dir, nodeUUID+"-"+hex.EncodeToString(rnd[:])+".bin")
	if err := os.Rename(f.Name(), final); err != nil {
		return stagedImage{}, fmt.Errorf("firmware staging: %w", err)
	}
	keep = true
	return stagedImage{path: final, url: strings.TrimSuffix(fc.BaseURL, "/") + "/" + filepath.Base(final), size: n}, nil
}

// open gives the driver the staged bytes (a BMC without SimpleUpdate gets
// them pushed).
func (s stagedImage) open() (driver.ReadSeekCloser, int64, error) {
	if s.path == "" {
		return nil, 0, fmt.Errorf("the image was not staged: castiron has no firmware staging directory")
	}
	f, err := os.Open(s.path)
	if err != nil {
		return nil, 0, err
	}
	return f, s.size, nil
}

// sweepStaged removes staged images older than age (left by a step that
// was aborted or timed out).
func sweepStaged(dir string, age time.Duration) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > age {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// redactURL drops credentials and the query (a signed URL's secret).
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(invalid URL)"
	}
	u.User = nil
	u.RawQuery = ""
	return u.String()
}

// cacheFirmware is Ironic's node_cache_firmware_components: read the
// node's firmware components from its firmware interface and store them.
// Failures are logged, not fatal (as in Ironic: cleaning ends anyway).
func (c *Conductor) cacheFirmware(ctx context.Context, hw *HardwareType, n *storage.Node) {
	fw, ok := hw.FirmwareOf(n)
	if !ok {
		return
	}
	comps, err := fw.FirmwareComponents(ctx, driverNode(n))
	if err != nil {
		c.log.WarnContext(ctx, "caching firmware components failed", "node", n.UUID, "error", err)
		return
	}
	rs := make([]storage.FirmwareReading, len(comps))
	for i, x := range comps {
		rs[i] = storage.FirmwareReading{Component: x.Component, CurrentVersion: x.Version, Vendor: x.Vendor, Model: x.Model, SerialNumber: x.SerialNumber}
	}
	if err := c.store.SyncFirmwareComponents(ctx, n.UUID, rs); err != nil {
		c.log.WarnContext(ctx, "storing firmware components failed", "node", n.UUID, "error", err)
		return
	}
	c.log.InfoContext(ctx, "firmware components cached", "node", n.UUID, "components", len(rs))
}

// cacheFirmwareOf is cacheFirmware for a node whose hardware type the
// caller has not looked up.
func (c *Conductor) cacheFirmwareOf(ctx context.Context, n *storage.Node) {
	if hw, err := c.hardwareOf(n); err == nil {
		c.cacheFirmware(ctx, hw, n)
	}
}
