package rootdevice

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"castiron/fault/pyrepr"
	"castiron/ramdisk/protocol"
)

type vectorFile struct {
	Disks []protocol.Disk `json:"disks"`
	Cases []struct {
		Hints        map[string]any `json:"hints"`
		ValidateOnly bool           `json:"validate_only"`
		Want         struct {
			Valid bool   `json:"valid"`
			Match string `json:"match"`
			None  bool   `json:"none"`
			Error string `json:"error"`
			Msg   string `json:"msg"`
		} `json:"want"`
	} `json:"cases"`
}

// TestIronicVectors replays answers recorded from Ironic's own hint code.
func TestIronicVectors(t *testing.T) {
	raw, err := os.ReadFile("testdata/ironic_vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var vf vectorFile
	if err := json.Unmarshal(raw, &vf); err != nil {
		t.Fatal(err)
	}
	for _, c := range vf.Cases {
		name := pyrepr.Repr(c.Hints)
		if c.ValidateOnly {
			name = "validate " + name
		}
		t.Run(name, func(t *testing.T) {
			var err error
			var got protocol.Disk
			if c.ValidateOnly {
				err = Validate(c.Hints)
			} else {
				got, err = Match(vf.Disks, c.Hints)
			}
			var inv *InvalidHintsError
			var none *NoDiskError
			w := c.Want
			switch {
			case w.Valid:
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
			case w.Match != "":
				if err != nil || got.Name != w.Match {
					t.Fatalf("want %s, got %q, %v", w.Match, got.Name, err)
				}
			case w.None:
				if !errors.As(err, &none) {
					t.Fatalf("want no match, got %q, %v", got.Name, err)
				}
			case w.Error == "invalid":
				if !errors.As(err, &inv) || err.Error() != w.Msg {
					t.Fatalf("want invalid %q, got %v", w.Msg, err)
				}
			case w.Error == "parse": // Ironic raises pyparsing's exception
				if !errors.As(err, &inv) || !strings.Contains(err.Error(), "cannot be parsed") {
					t.Fatalf("want unparsable, got %v", err)
				}
			case w.Error == "match":
				if !errors.As(err, &inv) || !strings.Contains(err.Error(), "failed to validate") {
					t.Fatalf("want a validation failure while matching, got %q, %v", got.Name, err)
				}
			default:
				t.Fatalf("bad vector %+v", w)
			}
		})
	}
}

func str(s string) *string { return &s }

func TestSelect(t *testing.T) {
	disks := []protocol.Disk{
		{Name: "/dev/sdc", Size: 8 << 30},
		{Name: "/dev/sdb", Size: 8 << 30},
		{Name: "/dev/sda", Size: 2 << 30, Serial: str("usb")},
		{Name: "/dev/nvme0n1", Size: 100 << 30, Model: "Fast"},
	}
	tests := []struct {
		name    string
		hints   map[string]any
		min     int64
		want    string
		wantErr string
	}{
		{"smallest of at least 4 GiB, ties by name", nil, MinRootDiskSize, "/dev/sdb", ""},
		{"no minimum", map[string]any{}, 0, "/dev/sda", ""},
		{"hints ignore the minimum", map[string]any{"serial": "usb"}, MinRootDiskSize, "/dev/sda", ""},
		{"model", map[string]any{"model": "fast"}, MinRootDiskSize, "/dev/nvme0n1", ""},
		{"size operator", map[string]any{"size": ">= 50"}, 0, "/dev/nvme0n1", ""},
		{"nothing large enough", nil, 200 << 30, "", "No suitable device was found for deployment - root device hints were not provided and all found block devices are smaller than 214748364800B."},
		{"nothing matches", map[string]any{"name": "/dev/sdz", "size": 8}, 0, "", "No disk matching the root device hints {'name': '/dev/sdz', 'size': 8} found"},
		{"invalid hints", map[string]any{"colour": "red", "age": 3}, 0, "", `The hints "age, colour" are invalid. Valid hints are: "size, model, wwn, serial, vendor, wwn_with_extension, wwn_vendor_extension, name, rotational, hctl, by_path"`},
		{"bad operator use", map[string]any{"model": "> 5"}, 0, "", "No devices could be found using the root device hints {'model': '> 5'} because they failed to validate. Error: could not convert string to float: 'fast'"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Select(disks, tc.hints, tc.min)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("want error %q, got %v (%s)", tc.wantErr, err, got.Name)
				}
				return
			}
			if err != nil || got.Name != tc.want {
				t.Fatalf("want %s, got %s, %v", tc.want, got.Name, err)
			}
		})
	}
}

func TestValidateMessages(t *testing.T) {
	tests := []struct {
		hints map[string]any
		want  string
	}{
		{nil, ""},
		{map[string]any{"size": float64(10)}, ""},
		{map[string]any{"size": 10.5}, `Root device hint "size" is not an integer value. Current value: 10.5`},
		{map[string]any{"rotational": "sometimes"}, `Root device hint "rotational" is not a Boolean value. Current value: sometimes`},
		{map[string]any{"serial": 1234}, `Root device hint "serial" is not a string value. Hint expression: 1234`},
		{map[string]any{"name": ""}, `Root device hint "name" expression is empty`},
		{map[string]any{"name": "=="}, `Root device hint "name" expression '==' cannot be parsed`},
	}
	for _, tc := range tests {
		err := Validate(tc.hints)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("Validate(%v) = %q, want %q", tc.hints, got, tc.want)
		}
	}
}

func TestSpecGrammar(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"foo", "foo"},
		{"s== foo bar", "s==|foo"},
		{"<or> a <or> b c", "<or>|a|b"},
		{"<all-in> a b", "<all-in>|a|b"},
		{"<range-in> [ 1 2 ]", "<range-in>|[|1|2|]"},
		{"<range-in> [1 2]", "<|range-in>"},
		{"<or>", "<|or>"},
		{"=>5", "!"},
		{"<", "!"},
		{"s<=x", "s<=|x"},
	}
	for _, tc := range tests {
		toks, err := parseSpec(tc.in)
		got := strings.Join(toks, "|")
		if err != nil {
			got = "!"
		}
		if got != tc.want {
			t.Errorf("parseSpec(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
