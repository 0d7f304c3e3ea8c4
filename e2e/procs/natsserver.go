package procs

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// NATS is one nats-server node.
type NATS struct {
	*Process
	// MonitorURL serves /healthz, /varz, /jsz.
	MonitorURL string
	// ClusterPort is the route port; 0 for a single server.
	ClusterPort int
}

// NATSOptions configure StartNATS and StartNATSCluster.
type NATSOptions struct {
	// Name prefixes the node names (zero: "nats"); nodes are <name>-1, ...
	Name string
	// Extra is appended verbatim to every node's configuration file, e.g.
	// "max_payload: 2MB".
	Extra string
}

// URLs returns the client URLs of nodes, for Role.NATS.
func URLs(nodes ...*NATS) []string {
	urls := make([]string, len(nodes))
	for i, n := range nodes {
		urls[i] = n.URL
	}
	return urls
}

// URLs is the node's client URL as a list, for Role.NATS. After a restart
// (n.Process, err = h.Restart(ctx, n.Process)) it is the same.
func (n *NATS) URLs() []string { return []string{n.URL} }

// StartNATS starts one nats-server with JetStream (file storage under the
// harness directory) on a free loopback port, and waits until its
// JetStream answers /healthz.
func (h *Harness) StartNATS(ctx context.Context, o NATSOptions) (*NATS, error) {
	nodes, err := h.startNATS(ctx, 1, o)
	if err != nil {
		return nil, err
	}
	return nodes[0], nil
}

// StartNATSCluster starts n nats-servers joined by routes into one
// JetStream cluster, and waits until each reports healthy, which includes
// having a JetStream meta leader.
func (h *Harness) StartNATSCluster(ctx context.Context, n int, o NATSOptions) ([]*NATS, error) {
	if n < 2 {
		return nil, fmt.Errorf("procs: a cluster needs at least 2 nodes, not %d", n)
	}
	return h.startNATS(ctx, n, o)
}

func (h *Harness) startNATS(ctx context.Context, n int, o NATSOptions) ([]*NATS, error) {
	if o.Name == "" {
		o.Name = "nats"
	}
	// Client, monitoring and route port of every node, picked together
	// because each node's routes name all the others.
	ports, err := FreePorts(3 * n)
	if err != nil {
		return nil, err
	}
	nodes := make([]*NATS, n)
	specs := make([]spec, n)
	for i := range n {
		name := fmt.Sprintf("%s-%d", o.Name, i+1)
		client, monitor, route := ports[3*i], ports[3*i+1], ports[3*i+2]
		if n == 1 {
			route = 0
		}
		conf := natsConfig(name, filepath.Join(h.dir, name), client, monitor, route, ports, n, o.Extra)
		confPath := filepath.Join(h.dir, name+".conf")
		if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
			return nil, fmt.Errorf("procs: %w", err)
		}
		monitorURL := fmt.Sprintf("http://127.0.0.1:%d", monitor)
		specs[i] = spec{
			name:  name,
			path:  h.bin.NATSServer,
			args:  []string{"-c", confPath},
			url:   fmt.Sprintf("nats://127.0.0.1:%d", client),
			ready: readiness{probe: healthy(monitorURL)},
			nats:  true,
		}
		nodes[i] = &NATS{MonitorURL: monitorURL, ClusterPort: route}
	}
	// Nodes of a cluster become healthy only together, so all are started
	// before any is waited for.
	type started struct {
		p   *Process
		err error
	}
	results := make(chan started, n)
	for i := range n {
		go func() {
			p, err := h.start(ctx, specs[i])
			results <- started{p, err}
		}()
	}
	var firstErr error
	for range n {
		r := <-results
		if r.err != nil && firstErr == nil {
			firstErr = r.err
		}
		for i := range specs {
			if r.p != nil && specs[i].name == r.p.Name {
				nodes[i].Process = r.p
			}
		}
	}
	if firstErr != nil {
		for _, node := range nodes {
			if node.Process != nil {
				node.Kill()
			}
		}
		return nil, firstErr
	}
	return nodes, nil
}

// natsConfig renders one node's configuration file.
func natsConfig(name, storeDir string, client, monitor, route int, ports []int, n int, extra string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "server_name: %q\nlisten: \"127.0.0.1:%d\"\nhttp: \"127.0.0.1:%d\"\n", name, client, monitor)
	fmt.Fprintf(&b, "jetstream {\n  store_dir: %q\n}\n", storeDir)
	if route != 0 {
		var routes []string
		for i := range n {
			if p := ports[3*i+2]; p != route {
				routes = append(routes, fmt.Sprintf("    \"nats-route://127.0.0.1:%d\"", p))
			}
		}
		fmt.Fprintf(&b, "cluster {\n  name: \"relay\"\n  listen: \"127.0.0.1:%d\"\n  routes: [\n%s\n  ]\n}\n", route, strings.Join(routes, "\n"))
	}
	if extra != "" {
		b.WriteString(extra + "\n")
	}
	return b.String()
}

// healthy probes a node's /healthz, which answers 200 only once JetStream
// is up (and, in a cluster, has a meta leader).
func healthy(monitorURL string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, monitorURL+"/healthz", nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("healthz: %s", resp.Status)
		}
		return nil
	}
}
