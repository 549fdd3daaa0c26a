package configdrive

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"

	"castiron/ramdisk/iso/isofix"
)

// versions are the metadata versions Ironic (openstacksdk's configdrive
// helper) writes, each a full copy.
var versions = []string{"2012-08-10", "latest"}

// Build makes Ironic's config drive image: an ISO 9660 file system with
// Rock Ridge and Joliet names labelled "config-2" holding, for each of
// openstack/2012-08-10 and openstack/latest, meta_data.json, and when given
// network_data.json, vendor_data2.json and user_data. metaData (nil means
// {}), networkData and vendorData are JSON-encoded; userData is written
// as is when a string or []byte and JSON-encoded otherwise.
func Build(metaData, userData, networkData, vendorData any) ([]byte, error) {
	if metaData == nil {
		metaData = map[string]any{}
	}
	files := map[string][]byte{}
	meta, err := encodeJSON(metaData)
	if err != nil {
		return nil, fmt.Errorf("configdrive meta_data: %w", err)
	}
	files["meta_data.json"] = meta
	if truthy(networkData) {
		if files["network_data.json"], err = encodeJSON(networkData); err != nil {
			return nil, fmt.Errorf("configdrive network_data: %w", err)
		}
	}
	if truthy(vendorData) {
		if files["vendor_data2.json"], err = encodeJSON(vendorData); err != nil {
			return nil, fmt.Errorf("configdrive vendor_data: %w", err)
		}
	}
	if truthy(userData) {
		switch u := userData.(type) {
		case string:
			files["user_data"] = []byte(u)
		case []byte:
			files["user_data"] = u
		default:
			if files["user_data"], err = encodeJSON(u); err != nil {
				return nil, fmt.Errorf("configdrive user_data: %w", err)
			}
		}
	}
	return buildISO(files)
}

// buildISO writes the files under every version directory into an ISO.
// go-diskfs stages files in a work directory and writes the image to a
// file, so both are temporary.
func buildISO(files map[string][]byte) (iso []byte, err error) {
	tmp, err := os.CreateTemp("", "configdrive-*.iso")
	if err != nil {
		return nil, err
	}
	defer func() {
		tmp.Close()
		os.Remove(tmp.Name())
	}()
	fs, err := iso9660.Create(file.New(tmp, false), 0, 0, 2048, "")
	if err != nil {
		return nil, fmt.Errorf("configdrive: %w", err)
	}
	defer os.RemoveAll(fs.Workspace()) // Finalize removes it; a failure may not
	for _, v := range versions {
		dir := path.Join("/openstack", v)
		if err := fs.Mkdir(dir); err != nil {
			return nil, fmt.Errorf("configdrive: %w", err)
		}
		for _, name := range sortedFileNames(files) {
			f, err := fs.OpenFile(path.Join(dir, name), os.O_CREATE|os.O_RDWR)
			if err != nil {
				return nil, fmt.Errorf("configdrive: %w", err)
			}
			_, werr := f.Write(files[name])
			cerr := f.Close()
			if werr != nil || cerr != nil {
				return nil, fmt.Errorf("configdrive: writing %s: %v %v", name, werr, cerr)
			}
		}
	}
	err = fs.Finalize(iso9660.FinalizeOptions{
		RockRidge:           true,
		Joliet:              true,
		VolumeIdentifier:    Label,
		PublisherIdentifier: "castiron",
	})
	if err != nil {
		return nil, fmt.Errorf("configdrive: %w", err)
	}
	iso, err = os.ReadFile(tmp.Name())
	if err != nil {
		return nil, err
	}
	// go-diskfs stops at the last byte of file data; the volume is whole
	// sectors (the size its descriptor gives).
	if len(iso) >= 32768+84 {
		if vol := int(binary.LittleEndian.Uint32(iso[32768+80:])) * isofix.Sector; vol > len(iso) && vol <= MaxSize {
			iso = append(iso, make([]byte, vol-len(iso))...)
		}
	}
	isofix.PadIdentifiers(iso)
	if err := isofix.FixJolietDirs(iso); err != nil {
		return nil, fmt.Errorf("configdrive: %w", err)
	}
	if len(iso) > MaxSize {
		return nil, ErrTooLarge
	}
	return iso, nil
}

func sortedFileNames(files map[string][]byte) []string {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// truthy is Python's truth of a JSON value: None, "", {} and [] are false.
func truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case string:
		return x != ""
	case []byte:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	case []any:
		return len(x) > 0
	case bool:
		return x
	case float64:
		return x != 0
	}
	return true
}

// encodeJSON without HTML escaping (Python's json does not escape <>&).
func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// jsonText is a value as Python's jsonschema prints it in messages.
func jsonText(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case string:
		return "'" + strings.ReplaceAll(x, "'", `\'`) + "'"
	case bool:
		if x {
			return "True"
		}
		return "False"
	case float64:
		if x == float64(int64(x)) {
			return strconv.FormatInt(int64(x), 10)
		}
		return strconv.FormatFloat(x, 'g', -1, 64)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = jsonText(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case map[string]any:
		keys := sortedKeys(x)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = jsonText(k) + ": " + jsonText(x[k])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return fmt.Sprint(v)
}
