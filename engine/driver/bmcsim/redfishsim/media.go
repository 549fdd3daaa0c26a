package redfishsim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

func (m *mediaSlot) kind() string {
	if slices.Contains(m.types, "CD") || slices.Contains(m.types, "DVD") {
		return "cd"
	}
	return "usb"
}

func (s *Server) slot(id string) *mediaSlot {
	i := slices.IndexFunc(s.media, func(m *mediaSlot) bool { return m.id == id })
	if i < 0 {
		return nil
	}
	return s.media[i]
}

func (s *Server) routeMedia(r *http.Request, p, base string, segs []string, body []byte, unlock func()) (answer, error) {
	if len(segs) == 0 {
		return get(r, func() (any, error) {
			var ms []string
			for _, m := range s.media {
				ms = append(ms, base+"/"+m.id)
			}
			return s.collection(base, "VirtualMedia", "Virtual Media Services", ms), nil
		})
	}
	m := s.slot(segs[0])
	if m == nil {
		return answer{}, notFound(p)
	}
	switch {
	case len(segs) == 1:
		return get(r, func() (any, error) { return s.mediaResource(base, m), nil })
	case len(segs) == 3 && segs[1] == "Actions" && segs[2] == "VirtualMedia.InsertMedia":
		if r.Method != http.MethodPost {
			return answer{}, notAllowed(r)
		}
		var in struct {
			Image          string
			Inserted       *bool
			WriteProtected *bool
		}
		if err := json.Unmarshal(body, &in); err != nil {
			return answer{}, errf(http.StatusBadRequest, "MalformedJSON", "The request body submitted was malformed JSON: %v", err)
		}
		if in.Image == "" {
			return answer{}, errf(http.StatusBadRequest, "ActionParameterMissing", "The action VirtualMedia.InsertMedia requires the parameter Image to be present in the request body.")
		}
		if !strings.HasPrefix(in.Image, "http://") && !strings.HasPrefix(in.Image, "https://") {
			return answer{}, errf(http.StatusBadRequest, "ActionParameterValueFormatError", "The value %s for the parameter Image in the action VirtualMedia.InsertMedia is of a different format than the parameter can accept (http or https).", in.Image)
		}
		if m.inserted {
			return answer{}, errf(http.StatusConflict, "ResourceInUse", "The virtual media %s already holds %s: eject it first.", m.id, m.image)
		}
		s.stats.Inserts++
		mc := s.cfg.Machine
		if mc == nil {
			m.image, m.inserted = in.Image, in.Inserted == nil || *in.Inserted
			return answer{code: http.StatusNoContent}, nil
		}
		// Machine mode: download the image (the request waits for it, as
		// sushy-tools' does), then put it into the VM's drive.
		dir, kind := s.cfg.MediaDir, m.kind()
		unlock()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), machineTimeout)
		defer cancel()
		local := filepath.Join(dir, fmt.Sprintf("%s-%s.img", kind, newID()[:12]))
		if err := s.download(ctx, in.Image, local); err != nil {
			var se *httpStatusError
			if errors.As(err, &se) {
				return answer{}, errf(http.StatusBadRequest, "ActionParameterValueFormatError", "The image %s could not be fetched: %v", in.Image, err)
			}
			return answer{}, errf(http.StatusInternalServerError, "InternalError", "The image %s could not be fetched: %v", in.Image, err)
		}
		if err := mc.SetMedia(ctx, kind, local); err != nil {
			_ = os.Remove(local)
			return answer{}, errf(http.StatusInternalServerError, "InternalError", "Inserting %s failed: %v", in.Image, err)
		}
		s.mu.Lock()
		old := m.local
		m.image, m.inserted, m.local = in.Image, true, local
		s.mu.Unlock()
		if old != "" {
			_ = os.Remove(old)
		}
		return answer{code: http.StatusNoContent}, nil
	case len(segs) == 3 && segs[1] == "Actions" && segs[2] == "VirtualMedia.EjectMedia":
		if r.Method != http.MethodPost {
			return answer{}, notAllowed(r)
		}
		s.stats.Ejects++
		mc, kind, old := s.cfg.Machine, m.kind(), m.local
		m.image, m.inserted, m.local = "", false, ""
		if mc == nil {
			return answer{code: http.StatusNoContent}, nil
		}
		unlock()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), machineTimeout)
		defer cancel()
		if err := mc.SetMedia(ctx, kind, ""); err != nil {
			return answer{}, errf(http.StatusInternalServerError, "InternalError", "Ejecting failed: %v", err)
		}
		if old != "" {
			_ = os.Remove(old)
		}
		return answer{code: http.StatusNoContent}, nil
	}
	return answer{}, notFound(p)
}

func (s *Server) mediaResource(base string, m *mediaSlot) map[string]any {
	p := base + "/" + m.id
	conn := "NotConnected"
	var image any
	if m.inserted {
		conn, image = "URI", m.image
	}
	name := ""
	if m.image != "" {
		name = m.image[strings.LastIndex(m.image, "/")+1:]
	}
	return map[string]any{
		"@odata.id": s.odata(p), "@odata.type": "#VirtualMedia.v1_3_0.VirtualMedia",
		"Id": m.id, "Name": "Virtual Media " + m.id, "MediaTypes": m.types,
		"Image": image, "ImageName": name, "Inserted": m.inserted, "WriteProtected": true, "ConnectedVia": conn,
		"TransferProtocolType": nil,
		"Actions": map[string]any{
			"#VirtualMedia.InsertMedia": map[string]any{"target": s.odata(p + "/Actions/VirtualMedia.InsertMedia")},
			"#VirtualMedia.EjectMedia":  map[string]any{"target": s.odata(p + "/Actions/VirtualMedia.EjectMedia")},
		},
	}
}

// download streams url into path.
func (s *Server) download(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return &httpStatusError{code: resp.StatusCode, url: url}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		_ = os.Remove(path)
		return err
	}
	return f.Close()
}

// Media is one virtual media slot as the BMC sees it.
type Media struct {
	ID       string
	Types    []string
	Image    string
	Inserted bool
	Path     string // the slot's Redfish path
}

// Media returns the virtual media slots.
func (s *Server) Media() []Media {
	s.mu.Lock()
	defer s.mu.Unlock()
	base := s.ManagerPath() + "/VirtualMedia"
	if s.cfg.VirtualMedia == "system" {
		base = s.SystemPath() + "/VirtualMedia"
	}
	var out []Media
	for _, m := range s.media {
		out = append(out, Media{ID: m.id, Types: slices.Clone(m.types), Image: m.image, Inserted: m.inserted, Path: base + "/" + m.id})
	}
	return out
}
