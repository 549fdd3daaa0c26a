package httpapi

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// appendMarshal must write the very bytes json.Marshal writes.
func TestAppendMarshalIsJSONMarshal(t *testing.T) {
	corpus := []any{
		nil, true, false, "", "plain", `quote " backslash \ slash /`, "<script>&amp;</script>", "tab\tnl\n\x00\x1f",
		"héllo ☃ 日本", "\u2028\u2029", "bad utf8 \xff\xfe", "emoji 🎉",
		0.0, math.Copysign(0, -1), 1.0, -1.5, 8.0, 16384.0, 123.456, 1e20, 1e21, 1.5e21, 1e-6, 9.99e-7, 1e-7, 1.234e-9,
		5e-324, math.MaxFloat64, -math.MaxFloat64, 1 << 53, 0.1 + 0.2, 100000000000000000000.0,
		int64(0), int64(-42), int64(math.MaxInt64), int64(math.MinInt64), 7,
		map[string]any(nil), map[string]any{}, []any(nil), []any{}, []string(nil), []string{}, []string{"CUSTOM_A", "b<c"},
		map[string]any{"cpus": 8.0, "memory_mb": 16384.0, "cpu_arch": "x86_64", "capabilities": "boot_mode:uefi"},
		map[string]any{"z": 1.0, "a": map[string]any{"y": []any{1.0, "x", nil, true, map[string]any{}}, "b": []any{}}, "M": "é", "<k>": "&"},
		map[string]any{"ipmi_password": "******", "deploy_kernel": "http://pxe/k?a=1&b=2"},
		// What json.Marshal refuses or does not see as a plain value: the
		// whole value must come out as json.Marshal has it ("null" on error).
		map[string]any{"nan": math.NaN()}, []any{1.0, math.Inf(1)}, math.NaN(),
		map[string]any{"n": json.Number("12.50")}, []any{json.RawMessage(`{"a": 1}`)}, map[string]any{"i32": int32(5)},
		map[string]string{"b": "2", "a": "1"}, struct{ A int }{1}, []int{1, 2},
		[]link{{Href: "http://h/v1/nodes/x", Rel: "self"}},
	}
	for _, v := range corpus {
		checkMarshal(t, v)
	}
	// Random JSON-shaped documents, as json.Unmarshal and storage produce them.
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		checkMarshal(t, randomJSON(r, 3))
	}
}

func checkMarshal(t *testing.T, v any) {
	t.Helper()
	want, err := json.Marshal(v)
	if err != nil {
		want = []byte("null")
	}
	var buf bytes.Buffer
	buf.WriteString("prefix:")
	appendMarshal(&buf, v)
	if got := strings.TrimPrefix(buf.String(), "prefix:"); got != string(want) {
		t.Errorf("%#v:\n got %s\nwant %s", v, got, want)
	}
}

func randomJSON(r *rand.Rand, depth int) any {
	k := r.IntN(9)
	if depth == 0 {
		k = r.IntN(6)
	}
	switch k {
	case 0:
		return nil
	case 1:
		return r.IntN(2) == 0
	case 2:
		return math.Float64frombits(r.Uint64()) // any bits: NaN, Inf, subnormals
	case 3:
		return float64(r.IntN(1<<20)) / float64(int(1)<<r.IntN(40))
	case 4:
		return int64(r.Uint64())
	case 5:
		return randomString(r)
	case 6, 7:
		m := map[string]any{}
		for n := r.IntN(6); n > 0; n-- {
			m[randomString(r)] = randomJSON(r, depth-1)
		}
		return m
	}
	l := []any{}
	for n := r.IntN(5); n > 0; n-- {
		l = append(l, randomJSON(r, depth-1))
	}
	return l
}

func randomString(r *rand.Rand) string {
	const alphabet = "abcXYZ09 _-:/\"\\<>&\t\n\x01é☃\u2028"
	rs := []rune(alphabet)
	var b strings.Builder
	for n := r.IntN(8); n > 0; n-- {
		b.WriteRune(rs[r.IntN(len(rs))])
	}
	if r.IntN(10) == 0 {
		b.WriteString("\xff")
	}
	return b.String()
}
