package metrics

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// scrapeTimeout bounds the store read of one scrape.
const scrapeTimeout = 5 * time.Second

var (
	nodesDesc = prometheus.NewDesc("castiron_nodes",
		"Nodes by provision state, power state (\"\" when unknown) and maintenance.",
		[]string{"provision_state", "power_state", "maintenance"}, nil)
	nodesUpDesc = prometheus.NewDesc("castiron_nodes_scrape_ok",
		"1 when castiron_nodes could be read from the database at this scrape, else 0.", nil, nil)
	leasesDesc = prometheus.NewDesc("castiron_dhcp_leases",
		"Addresses of the DHCP pool by state: in_use (a live lease or an offer's reservation) or free.",
		[]string{"state"}, nil)
)

// nodeCollector reads the node counts at each scrape: they are the
// database's, not something this process could count as it goes (other
// conductors, restarts).
type nodeCollector struct {
	count func(ctx context.Context) ([]NodeCount, error)
}

func (c *nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- nodesDesc
	ch <- nodesUpDesc
}

func (c *nodeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	counts, err := c.count(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(nodesUpDesc, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(nodesUpDesc, prometheus.GaugeValue, 1)
	for _, n := range counts {
		ch <- prometheus.MustNewConstMetric(nodesDesc, prometheus.GaugeValue, float64(n.Count),
			n.ProvisionState, n.PowerState, strconv.FormatBool(n.Maintenance))
	}
}

type leaseCollector struct {
	usage func() (inUse, free int)
}

func (c *leaseCollector) Describe(ch chan<- *prometheus.Desc) { ch <- leasesDesc }

func (c *leaseCollector) Collect(ch chan<- prometheus.Metric) {
	inUse, free := c.usage()
	ch <- prometheus.MustNewConstMetric(leasesDesc, prometheus.GaugeValue, float64(inUse), "in_use")
	ch <- prometheus.MustNewConstMetric(leasesDesc, prometheus.GaugeValue, float64(free), "free")
}
