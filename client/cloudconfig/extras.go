package cloudconfig

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	"go.yaml.in/yaml/v3"
)

// cloudExtras are the clouds.yaml keys gophercloud's parser does not
// return: the auth type and the endpoint of a cloud without Keystone
// (bifrost writes baremetal_endpoint_override; auth.endpoint is the
// none/http_basic plugins' option).
type cloudExtras struct {
	AuthType          string `yaml:"auth_type"`
	BaremetalOverride string `yaml:"baremetal_endpoint_override"`
	Auth              struct {
		Endpoint string `yaml:"endpoint"`
	} `yaml:"auth"`
}

func (e cloudExtras) endpoint() string {
	if e.BaremetalOverride != "" {
		return e.BaremetalOverride
	}
	return e.Auth.Endpoint
}

// loadCloud reads the clouds.yaml at path for gophercloud's parser and
// returns the named cloud's extra keys with the parse options that hand the
// file (and the secure.yaml beside it) to gophercloud.
func loadCloud(path, cloud string) (cloudExtras, []clouds.ParseOption, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return cloudExtras{}, nil, err
	}
	var doc struct {
		Clouds map[string]cloudExtras `yaml:"clouds"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return cloudExtras{}, nil, fmt.Errorf("%s: %w", path, err)
	}
	e, ok := doc.Clouds[cloud]
	if !ok {
		return cloudExtras{}, nil, fmt.Errorf("%s: no cloud %q", path, cloud)
	}
	if b, err = withAuthSection(b, cloud); err != nil {
		return cloudExtras{}, nil, fmt.Errorf("%s: %w", path, err)
	}
	opts := []clouds.ParseOption{clouds.WithCloudName(cloud), clouds.WithCloudsYAML(bytes.NewReader(b))}
	if sec, err := os.ReadFile(filepath.Join(filepath.Dir(path), "secure.yaml")); err == nil {
		opts = append(opts, clouds.WithSecureYAML(bytes.NewReader(sec)))
	}
	return e, opts, nil
}

// withAuthSection adds an empty auth section to a cloud that has none
// (auth_type none clouds often do): gophercloud's parser needs one.
func withAuthSection(b []byte, cloud string) ([]byte, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return nil, err
	}
	entry := mapValue(mapValue(root.Content[0], "clouds"), cloud)
	if entry == nil || entry.Kind != yaml.MappingNode || mapValue(entry, "auth") != nil {
		return b, nil
	}
	entry.Content = append(entry.Content,
		&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "auth"},
		&yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"})
	return yaml.Marshal(&root)
}

// mapValue is the value of key in a YAML mapping node, or nil.
func mapValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}
