// Package configdrive handles Ironic's config drive: it validates the
// forms the API accepts (a JSON object of meta_data, user_data,
// network_data and vendor_data, or a string holding a gzip+base64 ISO image
// or a URL to one), builds the ISO 9660 image Ironic builds from the JSON
// form (label "config-2", openstack/{2012-08-10,latest}/ files, Rock Ridge
// and Joliet names), and encodes and decodes the gzip+base64 string the
// agent receives. It is pure: the server builds and encodes, the agent
// decodes.
package configdrive

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// MaxSize is the largest config drive image ironic-python-agent writes
// (MAX_CONFIG_DRIVE_SIZE_MB).
const MaxSize = 64 << 20

// Label is the volume label cloud-init and Ironic look for.
const Label = "config-2"

// ConfigDrive is a node's configdrive in one of the forms Ironic accepts;
// exactly one field is set.
type ConfigDrive struct {
	// Contents is the JSON form, turned into an image by Contents.Build.
	Contents *Contents
	// URL is where the agent downloads the image (gzip+base64 or raw ISO).
	URL string
	// Image is a gzip+base64 ISO 9660 image.
	Image string
}

// Contents is the JSON form of a configdrive.
type Contents struct {
	MetaData    map[string]any
	UserData    any // string, JSON object or array, or nil
	NetworkData map[string]any
	VendorData  map[string]any
}

// InvalidError is a configdrive the API refuses; Error() is Ironic's text.
type InvalidError struct{ Msg string }

func (e *InvalidError) Error() string { return e.Msg }

func invalidf(format string, args ...any) error {
	return &InvalidError{Msg: fmt.Sprintf(format, args...)}
}

// Parse validates a configdrive as given to the provisioning API (Ironic's
// _CONFIG_DRIVE_SCHEMA and check_allow_configdrive). A nil or empty value
// gives a zero ConfigDrive and no error.
func Parse(v any) (ConfigDrive, error) {
	switch cd := v.(type) {
	case nil:
		return ConfigDrive{}, nil
	case string:
		if cd == "" {
			return ConfigDrive{}, nil
		}
		if IsURL(cd) {
			return ConfigDrive{URL: cd}, nil
		}
		for _, r := range cd {
			if !isBase64Rune(r) {
				return ConfigDrive{}, invalidf("Invalid configdrive format: it is neither a JSON, nor a URL, nor a base64 string")
			}
		}
		return ConfigDrive{Image: cd}, nil
	case map[string]any:
		c := &Contents{}
		for _, k := range sortedKeys(cd) {
			val := cd[k]
			switch k {
			case "meta_data", "network_data", "vendor_data":
				if val == nil {
					return ConfigDrive{}, invalidf("Invalid configdrive format: None is not of type 'object'")
				}
				m, ok := val.(map[string]any)
				if !ok {
					return ConfigDrive{}, invalidf("Invalid configdrive format: %s is not of type 'object'", jsonText(val))
				}
				switch k {
				case "meta_data":
					c.MetaData = m
				case "network_data":
					c.NetworkData = m
				default:
					c.VendorData = m
				}
			case "user_data":
				switch val.(type) {
				case nil, string, map[string]any, []any:
					c.UserData = val
				default:
					return ConfigDrive{}, invalidf("Invalid configdrive format: %s is not of type 'object', 'array', 'string', 'null'", jsonText(val))
				}
			default:
				return ConfigDrive{}, invalidf("Invalid configdrive format: Additional properties are not allowed ('%s' was unexpected)", k)
			}
		}
		return ConfigDrive{Contents: c}, nil
	}
	return ConfigDrive{}, invalidf("Invalid configdrive format: %s is not valid under any of the given schemas", jsonText(v))
}

// IsURL is Ironic's test: ":" is not a base64 symbol.
func IsURL(s string) bool { return strings.Contains(s, "://") }

// Base64 letters plus the whitespace Ironic lets through.
func isBase64Rune(r rune) bool {
	return r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' ||
		strings.ContainsRune("+/=\n\r\t ", r)
}

// AgentArg is the string the agent receives: the image as given, the URL,
// or the JSON form built into an image for the node (meta_data's uuid and
// name default to the node's, as in Ironic's build_configdrive) and
// encoded.
func (c ConfigDrive) AgentArg(nodeUUID, nodeName string) (string, error) {
	switch {
	case c.Contents != nil:
		iso, err := c.Contents.Build(nodeUUID, nodeName)
		if err != nil {
			return "", err
		}
		return Encode(iso)
	case c.URL != "":
		return c.URL, nil
	}
	return c.Image, nil
}

// Build makes the ISO image of the JSON form for a node: meta_data gets
// the node's uuid and name unless it has them.
func (c Contents) Build(nodeUUID, nodeName string) ([]byte, error) {
	meta := make(map[string]any, len(c.MetaData)+2)
	for k, v := range c.MetaData {
		meta[k] = v
	}
	if _, ok := meta["uuid"]; !ok && nodeUUID != "" {
		meta["uuid"] = nodeUUID
	}
	if _, ok := meta["name"]; !ok && nodeName != "" {
		meta["name"] = nodeName
	}
	return Build(meta, c.UserData, c.NetworkData, c.VendorData)
}

// Encode is what Ironic sends the agent: the image gzipped, then base64.
func Encode(iso []byte) (string, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(iso); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes()), nil
}

// ErrTooLarge is an image over MaxSize.
var ErrTooLarge = errors.New("Config drive size exceeds maximum limit of 64MiB")

// Decode turns an encoded configdrive back into the image: base64 (with
// any whitespace, as Python's b64decode) unless data is not base64 at all
// and came as raw bytes from a URL, then gunzipped when gzipped (a bare
// ISO is accepted too). The result is at most MaxSize bytes.
func Decode(data []byte) ([]byte, error) {
	raw := data
	clean := bytes.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == '\t' || r == ' ' {
			return -1
		}
		return r
	}, data)
	if dec, err := base64.StdEncoding.DecodeString(string(clean)); err == nil {
		raw = dec
	} else if !looksLikeImage(data) {
		return nil, fmt.Errorf("Config drive is not base64 encoded or the content is malformed. %v", err)
	}
	if len(raw) >= 2 && raw[0] == 0x1f && raw[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("Encountered error while decompressing config drive: %v", err)
		}
		out, err := io.ReadAll(io.LimitReader(zr, MaxSize+1))
		if err != nil {
			return nil, fmt.Errorf("Encountered error while decompressing config drive: %v", err)
		}
		raw = out
	}
	if len(raw) > MaxSize {
		return nil, ErrTooLarge
	}
	if len(raw) == 0 {
		return nil, errors.New("Config drive is empty")
	}
	return raw, nil
}

// looksLikeImage: a gzip stream or an ISO 9660 image (CD001 at 32 KiB + 1).
func looksLikeImage(b []byte) bool {
	if len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b {
		return true
	}
	return len(b) >= 32774 && string(b[32769:32774]) == "CD001"
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
