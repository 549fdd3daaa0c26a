package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"time"

	"castiron/engine"
	"castiron/storage"
)

type viewCtx struct {
	ver  Version
	cond *engine.Conductor
	base string
	// conductor, when pinned, is what a node view shows as its conductor
	// instead of asking the ring again (a cached view records the answer
	// it was rendered with).
	conductor *string
	pinned    bool
	// raw marks the document a PATCH applies to (Ironic's as_dict), not a
	// view: fields a version hides the values of show them as stored.
	raw bool
	// showDriverSecrets and showInstanceSecrets: the caller passes
	// show_password (driver_info, driver_internal_info) and
	// show_instance_secrets (instance_info), so those are not masked.
	showDriverSecrets, showInstanceSecrets bool
}

// unmasked reports whether field's secrets are shown to this caller.
func (v *viewCtx) unmasked(field string) bool {
	switch field {
	case "driver_info", "driver_internal_info":
		return v.showDriverSecrets
	case "instance_info":
		return v.showInstanceSecrets
	}
	return false
}

// conductorOf is what n's view shows as its conductor.
func (v *viewCtx) conductorOf(n *storage.Node) *string {
	if v.pinned {
		return v.conductor
	}
	return v.cond.ConductorFor(n)
}

func strOrNil(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

func timeOrNil(t *time.Time) any {
	if t == nil {
		return nil
	}
	return ironicTime(*t)
}

// ironicTime formats like Ironic: ISO 8601 with microseconds and +00:00.
func ironicTime(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000000") + "+00:00"
}

func (v *viewCtx) subLinks(n *storage.Node, sub string) []link {
	p := "nodes/" + n.UUID + "/" + sub
	return []link{{Href: v.base + "/v1/" + p, Rel: "self"}, {Href: v.base + "/" + p, Rel: "bookmark"}}
}

// provisionStateAt maps the stored state to what an older client expects.
func provisionStateAt(ver Version, s string) any {
	switch {
	case s == string(engine.Available) && !ver.AtLeast(2):
		return nil
	case s == string(engine.InspectWait) && !ver.AtLeast(39):
		return string(engine.Inspecting)
	}
	return s
}

func (a *API) view(r *http.Request) *viewCtx {
	v := &viewCtx{ver: versionOf(r), cond: a.cond, base: baseURL(r)}
	v.showDriverSecrets, v.showInstanceSecrets = a.secretsShown(r)
	return v
}

// appendJSON writes a field's value: links in Ironic's spaced format,
// anything else exactly as json.Marshal would (appendMarshal, without its
// reflection: a list page renders hundreds of small values).
func appendJSON(buf *bytes.Buffer, v any) {
	links, ok := v.([]link)
	if !ok {
		appendMarshal(buf, v)
		return
	}
	buf.WriteByte('[')
	for i, l := range links {
		if i > 0 {
			buf.WriteString(", ")
		}
		buf.WriteString(`{"href": `)
		appendJSONString(buf, l.Href)
		buf.WriteString(`, "rel": `)
		appendJSONString(buf, l.Rel)
		if l.Type != "" {
			buf.WriteString(`, "type": `)
			appendJSONString(buf, l.Type)
		}
		buf.WriteByte('}')
	}
	buf.WriteByte(']')
}

// appendJSONString writes s as a JSON string; anything unusual goes through
// encoding/json so escaping stays exactly right.
func appendJSONString(buf *bytes.Buffer, s string) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s)
			buf.Write(b)
			return
		}
	}
	buf.WriteByte('"')
	buf.WriteString(s)
	buf.WriteByte('"')
}
