package appliance

import (
	"context"
	"net/http"

	"castiron/engine"
	"castiron/httpapi"
	"castiron/httpapi/metrics"
	"castiron/pxe/boot"
	"castiron/storage"
)

// observers are the metrics as each layer takes them; all nil (the
// layers' no-op defaults) with --metrics=false.
type observers struct {
	m      *metrics.Metrics
	engine engine.Observer
	api    httpapi.RequestObserver
	boot   boot.Meter
}

// newObservers makes /metrics for this process, with the store's node
// counts and group commits.
func newObservers(enabled bool, version string, store *storage.SQLite) observers {
	if !enabled {
		return observers{}
	}
	m := metrics.New(metrics.Sources{
		Version: version,
		Nodes: func(ctx context.Context) ([]metrics.NodeCount, error) {
			counts, err := store.CountNodes(ctx)
			out := make([]metrics.NodeCount, len(counts))
			for i, c := range counts {
				out[i] = metrics.NodeCount(c)
			}
			return out, err
		},
	})
	store.ObserveCommits(m)
	return observers{m: m, engine: m, api: m, boot: m}
}

// watchLeases adds the DHCP pool when castiron hands out addresses.
func (o observers) watchLeases(p *provisioning) {
	if o.m != nil && p.dhcp != nil && p.cfg.dhcpMode == "full" {
		o.m.WatchLeases(p.dhcp.LeaseUsage)
	}
}

// mount adds GET /metrics, behind the API's authentication.
func (o observers) mount(mounts map[string]http.Handler, auth httpapi.Authenticator) {
	if o.m != nil {
		mounts["GET /metrics"] = httpapi.RequireAuth(auth, o.m.Handler())
	}
}
