package client

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// ironic21 answers like Ironic 21.4: maximum 1.82, the version each request
// carried is recorded.
func ironic21(t *testing.T, h http.HandlerFunc) (*httptest.Server, *[]string) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path+" "+r.Header.Get("X-OpenStack-Ironic-API-Version"))
		mu.Unlock()
		w.Header().Set("X-OpenStack-Ironic-API-Minimum-Version", "1.1")
		w.Header().Set("X-OpenStack-Ironic-API-Maximum-Version", "1.82")
		switch r.URL.Path {
		case "/v1":
			w.Write([]byte(`{"id":"v1","version":{"version":"1.82","min_version":"1.1","status":"CURRENT"}}`))
			return
		case "/": // the root document gophercloud reads when it takes the endpoint from a catalog
			w.Write([]byte(`{"name":"OpenStack Ironic API","versions":[{"id":"v1","status":"CURRENT","version":"1.82","min_version":"1.1","links":[{"href":"http://` + r.Host + `/v1/","rel":"self"}]}]}`))
			return
		}
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &seen
}

func TestNegotiatesDownToServerMaximum(t *testing.T) {
	srv, seen := ironic21(t, func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"uuid":"u1","name":"n1","provision_state":"enroll","driver_info":{"ipmi_password":"******"}}`))
	})
	c, err := New(context.Background(), Config{URL: srv.URL + "/v1/"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Version() != "1.82" {
		t.Errorf("negotiated %s, want 1.82 (min of server 1.82 and client 1.%d)", c.Version(), MaxMinor)
	}
	n, err := c.GetNode(context.Background(), "n1")
	if err != nil || n.UUID != "u1" || n.DriverInfo["ipmi_password"] != "******" || !strings.Contains(string(n.Raw), `"name":"n1"`) {
		t.Fatalf("%v %+v", err, n)
	}
	if got := (*seen)[1]; got != "GET /v1/nodes/n1 1.82" {
		t.Errorf("request %q", got)
	}
}

func TestNegotiationFromDocumentAndCap(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// no headers: the document says 1.95, above the client's maximum
		w.Write([]byte(`{"version":{"version":"1.95"}}`))
	}))
	defer srv.Close()
	c, err := New(context.Background(), Config{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if c.Minor() != MaxMinor {
		t.Errorf("minor %d, want %d", c.Minor(), MaxMinor)
	}
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{}`)) }))
	defer bad.Close()
	if _, err := New(context.Background(), Config{URL: bad.URL}); err == nil || !strings.Contains(err.Error(), "no usable maximum API version") {
		t.Errorf("no version: %v", err)
	}
}

func TestDecodesIronicErrors(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		status     int
		fault      string
	}{
		{"string error_message", `{"error_message": "{\"faultstring\": \"Node n9 could not be found.\", \"debuginfo\": null, \"faultcode\": \"Client\"}"}`, 404, "Node n9 could not be found."},
		{"object error_message", `{"error_message": {"faultstring": "The requested action \"inspect\" can not be performed on node \"u1\" while it is in state \"available\".", "faultcode": "Client"}}`, 400, `while it is in state "available".`},
		{"version middleware", `{"errors": [{"code": "406", "title": "Not Acceptable", "description": "Version 1.99 was requested but the maximum version supported is 1.82."}]}`, 406, "maximum version supported is 1.82"},
		{"not json", `Service Unavailable`, 503, "Service Unavailable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := ironic21(t, func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				w.Write([]byte(tc.body))
			})
			c, err := New(context.Background(), Config{URL: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			err = c.SetProvisionState(context.Background(), "u1", "inspect")
			var e *Error
			if !errors.As(err, &e) || e.Status != tc.status || !strings.Contains(e.Fault, tc.fault) || StatusOf(err) != tc.status {
				t.Fatalf("%#v", err)
			}
			if !strings.Contains(err.Error(), "PUT /v1/nodes/u1/states/provision") {
				t.Errorf("message %q", err)
			}
		})
	}
}

func TestBasicAuthAndPaging(t *testing.T) {
	srv, seen := ironic21(t, func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "admin" || p != "s3cret" {
			w.WriteHeader(401)
			w.Write([]byte(`{"error_message": "{\"faultstring\": \"Incorrect username or password\"}"}`))
			return
		}
		switch r.URL.Query().Get("marker") {
		case "":
			w.Write([]byte(`{"nodes":[{"uuid":"a"},{"uuid":"b"}],"next":"http://elsewhere:6385/v1/nodes/detail?limit=2&marker=b"}`))
		case "b":
			w.Write([]byte(`{"nodes":[{"uuid":"c"}]}`))
		}
	})
	c, err := New(context.Background(), Config{URL: srv.URL, User: "admin", Password: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := c.ListNodes(context.Background(), nil)
	if err != nil || len(nodes) != 3 || nodes[2].UUID != "c" {
		t.Fatalf("%v %v", err, nodes)
	}
	if last := (*seen)[len(*seen)-1]; last != "GET /v1/nodes/detail 1.82" {
		t.Errorf("next link not followed on our base: %v", *seen)
	}
	wrong, _ := New(context.Background(), Config{URL: srv.URL, User: "admin", Password: "nope"})
	if _, err := wrong.ListNodes(context.Background(), nil); StatusOf(err) != 401 || !strings.Contains(err.Error(), "Incorrect username or password") {
		t.Errorf("wrong password: %v", err)
	}
}
