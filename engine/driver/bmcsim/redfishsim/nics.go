package redfishsim

import "net/http"

// The Chassis' NetworkAdapters: one per NIC firmware component, with the
// firmware version its controller runs (Controllers/FirmwarePackageVersion,
// where Ironic's redfish firmware interface reads NIC firmware).

func (s *Server) adapterPath(id string) string { return s.ChassisPath() + "/NetworkAdapters/" + id }

func (s *Server) routeAdapters(r *http.Request, p string, segs []string) (answer, error) {
	if len(segs) == 0 {
		return get(r, func() (any, error) {
			var ms []string
			for _, c := range s.firmware {
				if c.adapter != "" {
					ms = append(ms, s.adapterPath(c.adapter))
				}
			}
			return s.collection(s.ChassisPath()+"/NetworkAdapters", "NetworkAdapter", "Network Adapter Collection", ms), nil
		})
	}
	for _, c := range s.firmware {
		if c.adapter == "" || len(segs) != 1 || segs[0] != c.adapter {
			continue
		}
		return get(r, func() (any, error) {
			return map[string]any{
				"@odata.id": s.odata(s.adapterPath(c.adapter)), "@odata.type": "#NetworkAdapter.v1_5_0.NetworkAdapter",
				"Id": c.adapter, "Name": c.Name, "Manufacturer": s.fl.manufacturer, "Model": c.Name,
				"SerialNumber": "SIMNIC" + c.adapter, "PartNumber": "SIM-" + c.ID,
				"Status": map[string]any{"State": "Enabled", "Health": "OK"},
				"Controllers": []any{map[string]any{"FirmwarePackageVersion": c.Version,
					"ControllerCapabilities": map[string]any{"NetworkPortCount": 2}}},
			}, nil
		})
	}
	return answer{}, notFound(p)
}
