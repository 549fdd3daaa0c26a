package main

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"
)

// TestMeasurementsOfPassedTests: a passed test's E2E-TIMING lines are
// printed (once), its other lines are not; a failed test prints everything.
func TestMeasurementsOfPassedTests(t *testing.T) {
	evs := []event{
		{Action: "output", Package: "p", Test: "TestA", Output: "=== RUN   TestA\n"},
		{Action: "output", Package: "p", Test: "TestA", Output: "    a_test.go:1: lab ready\n"},
		{Action: "output", Package: "p", Test: "TestA", Output: "    a_test.go:2: E2E-TIMING inspect_bios total=9.00s\n"},
		{Action: "output", Package: "p", Test: "TestA", Output: "--- PASS: TestA (9.00s)\n"},
		{Action: "pass", Package: "p", Test: "TestA"},
		{Action: "output", Package: "p", Test: "TestB", Output: "    b_test.go:1: E2E-TIMING inspect_uefi_failed total=1.00s\n"},
		{Action: "output", Package: "p", Test: "TestB", Output: "--- FAIL: TestB (1.00s)\n"},
		{Action: "fail", Package: "p", Test: "TestB"},
	}
	var out strings.Builder
	s := &summary{out: &out, buf: map[key][]string{}, pending: map[key][]string{}}
	for _, e := range evs {
		b, _ := json.Marshal(e)
		var back event
		json.Unmarshal(b, &back)
		s.event(back)
	}
	got := out.String()
	for _, want := range []string{"E2E-TIMING inspect_bios total=9.00s\n", "--- FAIL: TestB", "E2E-TIMING inspect_uefi_failed total=1.00s\n"} {
		if strings.Count(got, want) != 1 {
			t.Errorf("output has %q %d times, want once:\n%s", want, strings.Count(got, want), got)
		}
	}
	sc := bufio.NewScanner(strings.NewReader(got))
	for sc.Scan() {
		if strings.Contains(sc.Text(), "lab ready") || strings.Contains(sc.Text(), "PASS: TestA") {
			t.Errorf("a passed test's other output was printed: %q", sc.Text())
		}
	}
}
