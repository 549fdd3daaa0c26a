package httpapi

import (
	"io"
	"net/http"
	"testing"
)

// BenchmarkAccess: GET /v1/nodes/{id} and a 2-node list under noauth, an
// unrestricted htpasswd user, and users-file callers whose requests go
// through policy (a system reader: node lookup and rules; a project
// reader: also the per-node redaction and the uncached view), side by
// side in one run.
func BenchmarkAccess(b *testing.B) {
	h := newRBAC(b)
	a, _, _, _ := rbacFixture(b, h)
	noauth, id := apiWithNode(b, map[string]any{})
	cases := []struct {
		name, user string
		srv        *apiHarness
		node       string
	}{
		{"noauth", "", noauth, id},
		{"system-reader", "sysreader", h.apiHarness, a},
		{"project-reader", "ownerreader", h.apiHarness, a},
	}
	for _, c := range cases {
		for _, path := range []string{"/v1/nodes/" + c.node, "/v1/nodes/detail"} {
			name := c.name + "/get"
			if path == "/v1/nodes/detail" {
				name = c.name + "/list"
			}
			b.Run(name, func(b *testing.B) {
				client := c.srv.srv.Client()
				for b.Loop() {
					req, _ := http.NewRequest("GET", c.srv.srv.URL+path, nil)
					req.Header.Set(hdrVersion, "1.80")
					if c.user != "" {
						req.SetBasicAuth(c.user, "pw-"+c.user)
					}
					res, err := client.Do(req)
					if err != nil {
						b.Fatal(err)
					}
					io.Copy(io.Discard, res.Body)
					res.Body.Close()
					if res.StatusCode != 200 {
						b.Fatalf("%s %s: %d", c.user, path, res.StatusCode)
					}
				}
			})
		}
	}
}
