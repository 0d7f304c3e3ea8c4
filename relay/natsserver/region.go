package natsserver

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/relaydev/relay/relay/region"
)

// Regions (configs/README.md "Regions"): every region runs its own JetStream domain,
// and the regions are joined by leaf node connections. The home region's
// servers listen for leaf nodes (a hub); every other region's servers dial
// it (leaves). The embedded server can play either part, so two `relay dev`
// processes, or a test, can run two regions on one machine.

// LeafConfig joins an embedded server to other regions. The zero value
// joins nothing.
type LeafConfig struct {
	// Listen is host:port on which a hub accepts the leaf node connections
	// of other regions; port 0 or -1 picks a free one (zero: no leaf
	// listener). The hub accepts any leaf: it is meant for loopback and
	// private networks; production hubs are configured by a nats-server
	// file with leafnode authorization (configs/regions/).
	Listen string `koanf:"listen"`
	// Remotes are the hubs this server joins as a leaf, as
	// nats-leaf://[user:password@]host:port URLs (zero: none). All URLs
	// name servers of one hub cluster: the leaf connects to one of them and
	// fails over to the others. The relay's own subjects (relay.>) do not
	// cross the connection (region.RegionLocalSubjects); KV traffic only
	// crosses as JetStream domain traffic.
	Remotes []string `koanf:"remotes"`
}

// validateRegion names the first invalid region field of c under prefix.
func (c Config) validateRegion(prefix string) error {
	if c.Domain != "" && !validDomain(c.Domain) {
		return fmt.Errorf("%s.domain: %q is not a JetStream domain name (letters, digits, - and _)", prefix, c.Domain)
	}
	if c.Leaf.Listen != "" {
		if _, _, err := splitHostPort(c.Leaf.Listen); err != nil {
			return fmt.Errorf("%s.leaf.listen: %v", prefix, err)
		}
	}
	for i, raw := range c.Leaf.Remotes {
		if _, err := parseLeafURL(raw); err != nil {
			return fmt.Errorf("%s.leaf.remotes[%d]: %v", prefix, i, err)
		}
	}
	if (c.Leaf.Listen != "" || len(c.Leaf.Remotes) > 0) && c.Domain == "" {
		// Without a domain, a leaf extends the hub's JetStream instead of
		// running its own: the regions would share one meta group.
		return fmt.Errorf("%s.domain: required with %s.leaf (one JetStream domain per region)", prefix, prefix)
	}
	return nil
}

func validDomain(d string) bool {
	for _, r := range d {
		ok := r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		if !ok {
			return false
		}
	}
	return d != ""
}

func parseLeafURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	switch u.Scheme {
	case "nats-leaf", "nats", "tls":
	default:
		return nil, fmt.Errorf("%q: scheme must be nats-leaf, nats or tls", raw)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("%q: no host", raw)
	}
	return u, nil
}

// applyRegion sets the JetStream domain and the leaf node options of cfg.
func applyRegion(opts *server.Options, cfg Config) error {
	opts.JetStreamDomain = cfg.Domain
	if cfg.Domain != "" {
		// Servers of different regions must not share a name.
		opts.ServerName = "relay-embedded-" + cfg.Domain
	}
	if cfg.Leaf.Listen != "" {
		host, port, err := splitHostPort(cfg.Leaf.Listen)
		if err != nil {
			return fmt.Errorf("natsserver: leaf listen %q: %w", cfg.Leaf.Listen, err)
		}
		opts.LeafNode.Host, opts.LeafNode.Port = host, port
		// Leaves dial only the URLs they were given: a proxy, NAT or load
		// balancer in between stays in between.
		opts.LeafNode.NoAdvertise = true
	}
	for _, raw := range cfg.Leaf.Remotes {
		u, err := parseLeafURL(raw)
		if err != nil {
			return fmt.Errorf("natsserver: leaf remote: %w", err)
		}
		opts.LeafNode.Remotes = append(opts.LeafNode.Remotes, &server.RemoteLeafOpts{
			URLs: []*url.URL{u},
			// Both directions: neither region's requests, frames,
			// heartbeats or cancellations reach the other's streams and
			// subscribers.
			DenyImports: region.RegionLocalSubjects(),
			DenyExports: region.RegionLocalSubjects(),
		})
	}
	return nil
}

// LeafURL is the nats-leaf:// URL on which s, a hub, accepts leaf nodes.
func LeafURL(s *server.Server) (string, error) {
	v, err := s.Varz(nil)
	if err != nil {
		return "", fmt.Errorf("natsserver: %w", err)
	}
	if v.LeafNode.Port <= 0 {
		return "", errors.New("natsserver: no leaf node listener")
	}
	host := v.LeafNode.Host
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return "nats-leaf://" + net.JoinHostPort(strings.Trim(host, "[]"), strconv.Itoa(v.LeafNode.Port)), nil
}

// LeafConnected reports whether s has at least one leaf node connection
// (to a hub, or from a leaf).
func LeafConnected(s *server.Server) bool { return s.NumLeafNodes() > 0 }
