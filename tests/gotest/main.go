// Command gotest reads `go test -json` on stdin and prints what plain
// `go test` prints (the ok/FAIL line of every package, the full output of
// every failed test, build errors), plus the E2E-TIMING lines of passed
// tests, then closing lines with the counts:
//
//	go test -json ./... | go run ./tests/gotest
//
// It exits 1 when a test, a package or a build failed. Lines that are not
// JSON are printed as they are.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

type event struct {
	Action     string
	Package    string
	ImportPath string
	Test       string
	Output     string
}

type key struct{ pkg, test string }

type summary struct {
	out                     io.Writer
	buf                     map[key][]string // output of running tests
	pending                 map[key][]string // failed subtests' output, by top-level test
	passed, failed, skipped int              // all tests, subtests included
	topPassed, topFailed    int
	skips                   []string // top-level skipped tests with reason
	pkgOK, pkgFail          []string
	buildFail               bool
}

func main() {
	s := &summary{out: os.Stdout, buf: map[key][]string{}, pending: map[key][]string{}}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintln(s.out, string(line))
			continue
		}
		s.event(e)
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "gotest: reading input:", err)
		os.Exit(1)
	}
	if !s.report() {
		os.Exit(1)
	}
}

func (s *summary) event(e event) {
	k := key{e.Package, e.Test}
	switch e.Action {
	case "build-output":
		fmt.Fprint(s.out, e.Output)
	case "build-fail":
		s.buildFail = true
	case "output":
		if e.Test == "" {
			// Package-level lines: "ok ...", "FAIL ...", "? ... [no test
			// files]", panics outside tests. Plain go test does not print
			// the lone PASS or the === markers.
			if e.Output == "PASS\n" || strings.HasPrefix(e.Output, "=== ") {
				return
			}
			if strings.HasPrefix(e.Output, "FAIL\t") {
				s.flushOpen(e.Package)
			}
			fmt.Fprint(s.out, e.Output)
			return
		}
		s.buf[k] = append(s.buf[k], e.Output)
	case "pass":
		if e.Test == "" {
			s.pkgOK = append(s.pkgOK, e.Package)
			return
		}
		s.passed++
		if !strings.Contains(e.Test, "/") {
			s.topPassed++
		}
		s.measurements(k)
		delete(s.buf, k)
	case "skip":
		if e.Test == "" {
			return
		}
		s.skipped++
		if !strings.Contains(e.Test, "/") {
			s.skips = append(s.skips, fmt.Sprintf("%s %s: %s", e.Package, e.Test, skipReason(s.buf[k])))
		}
		delete(s.buf, k)
	case "fail":
		if e.Test == "" {
			s.pkgFail = append(s.pkgFail, e.Package)
			s.flushOpen(e.Package)
			return
		}
		s.failed++
		if !strings.Contains(e.Test, "/") {
			s.topFailed++
		}
		s.flush(k)
	}
}

// measurements prints a passed test's E2E-TIMING lines (the end-to-end
// suite's figures, which make e2e is run for); the rest of its output is
// dropped, as plain go test does.
func (s *summary) measurements(k key) {
	for _, l := range s.buf[k] {
		if strings.Contains(l, "E2E-TIMING ") {
			fmt.Fprint(s.out, l)
		}
	}
}

// flushOpen prints the tests of pkg that never ended: a timeout or a panic
// stops a package with tests still running.
func (s *summary) flushOpen(pkg string) {
	var open []key
	for _, m := range []map[key][]string{s.buf, s.pending} {
		for k := range m {
			if k.pkg == pkg {
				open = append(open, k)
			}
		}
	}
	sort.Slice(open, func(i, j int) bool { return open[i].test < open[j].test })
	for _, k := range open {
		if _, ok := s.buf[k]; ok {
			s.flush(k)
		} else if p, ok := s.pending[k]; ok {
			delete(s.pending, k)
			for _, l := range p {
				fmt.Fprint(s.out, l)
			}
		}
	}
}

// flush prints a failed test's output as plain go test does: its
// "--- FAIL" line, its log lines, then its failed subtests. A failed
// subtest's block waits for its parent.
func (s *summary) flush(k key) {
	var head, body []string
	for _, l := range s.buf[k] {
		switch t := strings.TrimLeft(l, " "); {
		case strings.HasPrefix(t, "=== "):
		case strings.HasPrefix(t, "--- "):
			head = append(head, l)
		default:
			body = append(body, l)
		}
	}
	delete(s.buf, k)
	block := append(append(head, body...), s.pending[k]...)
	delete(s.pending, k)
	if i := strings.LastIndex(k.test, "/"); i >= 0 {
		pk := key{k.pkg, k.test[:i]}
		s.pending[pk] = append(s.pending[pk], block...)
		return
	}
	for _, l := range block {
		fmt.Fprint(s.out, l)
	}
}

// skipReason is the t.Skip message from a skipped test's output.
func skipReason(lines []string) string {
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "=== ") || strings.HasPrefix(l, "--- SKIP") {
			continue
		}
		return l
	}
	return "(no reason given)"
}

// report prints the closing lines and says whether everything passed.
func (s *summary) report() bool {
	fmt.Fprintln(s.out)
	for _, sk := range s.skips {
		fmt.Fprintln(s.out, "SKIP", sk)
	}
	for _, p := range s.pkgFail {
		fmt.Fprintln(s.out, "FAIL package", p)
	}
	if s.buildFail {
		fmt.Fprintln(s.out, "FAIL build (see the errors above)")
	}
	fmt.Fprintf(s.out, "go test: %d passed, %d failed, %d skipped (top-level tests: %d passed, %d failed, %d skipped); packages: %d ok, %d FAIL\n",
		s.passed, s.failed, s.skipped, s.topPassed, s.topFailed, len(s.skips), len(s.pkgOK), len(s.pkgFail))
	ok := s.failed == 0 && len(s.pkgFail) == 0 && !s.buildFail
	if ok {
		fmt.Fprintln(s.out, "PASS")
	} else {
		fmt.Fprintln(s.out, "FAIL")
	}
	return ok
}
