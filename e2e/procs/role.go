package procs

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Relay subcommands a Role can run.
const (
	Edge         = "edge"
	Worker       = "worker"
	Coordinator  = "coordinator"
	MockUpstream = "mock-upstream"
	// Dev is `relay dev`: embedded NATS, edge, worker and coordinator in
	// one process (the fake upstream too, unused when Providers are
	// given). Its Process.URL is the edge's; Process.NATS the embedded
	// server's client URL.
	Dev = "dev"
)

// Settings are configuration keys in dotted form, as --set takes them:
// {"worker.max_inflight": 256, "streams.ack_wait": "2s"}. Values are
// written into the role's YAML file, so numbers, booleans and lists keep
// their type.
type Settings map[string]any

// Provider is one element of the providers list.
type Provider struct {
	Name string `json:"name"`
	// Type is the API the provider speaks; zero: openai.
	Type    string   `json:"type,omitempty"`
	BaseURL string   `json:"base_url"`
	APIKeys []string `json:"api_keys,omitempty"`
	Models  []string `json:"models"`
	// Breaker is the provider's breaker section, by key ({"failures": 1,
	// "cooldown": "1m"}); nil keeps the defaults.
	Breaker map[string]any `json:"breaker,omitempty"`
	// HTTP2PriorKnowledge calls the provider over h2c, which the fake
	// upstream speaks besides HTTP/1.1.
	HTTP2PriorKnowledge bool `json:"http2_prior_knowledge,omitempty"`
}

// Provider describes a running fake upstream as a provider serving models.
func (p *Process) Provider(name string, models ...string) Provider {
	return Provider{Name: name, BaseURL: p.URL, Models: models}
}

// Role is one relay process to start.
type Role struct {
	// Role is Edge, Worker, Coordinator, MockUpstream or Dev.
	Role string
	// Name names the process, its log and its configuration file (zero:
	// "<role>-<n>"). A worker's worker.id defaults to it.
	Name string
	// NATS are the client URLs of the servers (not for MockUpstream and
	// Dev).
	NATS []string
	// Providers are the upstreams (not for MockUpstream).
	Providers []Provider
	// Settings are applied over what the harness sets: loopback listeners
	// on free ports, nats.url, providers, worker.id, and
	// edge.allow_anonymous.
	Settings Settings
	// Env is added to the process's environment ("GOTRACEBACK=system").
	Env []string
}

// Start writes r's configuration file, starts the relay binary with it and
// waits for the role's ready line, whose URL becomes Process.URL.
func (h *Harness) Start(ctx context.Context, r Role) (*Process, error) {
	switch r.Role {
	case Edge, Worker, Coordinator, MockUpstream, Dev:
	default:
		return nil, fmt.Errorf("procs: unknown role %q", r.Role)
	}
	if r.Name == "" {
		h.mu.Lock()
		for n := 1; r.Name == ""; n++ {
			name := fmt.Sprintf("%s-%d", r.Role, n)
			if _, used := h.names[name]; !used {
				r.Name = name
				h.names[name] = 0 // reserved; start counts the start
			}
		}
		h.mu.Unlock()
	}
	var embedded string // dev's NATS URL, on a port chosen here
	if r.Role == Dev {
		ports, err := FreePorts(1)
		if err != nil {
			return nil, err
		}
		// dev's server refuses clients without its credentials: the
		// harness names them, so that its tests can connect too.
		addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
		embedded = "nats://e2e:" + r.Name + "-secret@" + addr
		r.Settings = withDefaults(r.Settings, Settings{
			"embedded_nats.listen":    addr,
			"embedded_nats.store_dir": filepath.Join(h.dir, r.Name+"-store"),
			"embedded_nats.user":      "e2e",
			"embedded_nats.password":  r.Name + "-secret",
		})
	}
	conf, err := roleConfig(r)
	if err != nil {
		return nil, err
	}
	confPath := filepath.Join(h.dir, r.Name+".yaml")
	if err := os.WriteFile(confPath, conf, 0o644); err != nil {
		return nil, fmt.Errorf("procs: %w", err)
	}
	return h.start(ctx, spec{
		name:     r.Name,
		path:     h.bin.Relay,
		args:     []string{r.Role, "--config", confPath},
		ready:    readiness{line: readyLine(r.Role)},
		embedded: embedded,
		env:      r.Env,
	})
}

// withDefaults returns s with each of defaults' keys that s does not set.
func withDefaults(s, defaults Settings) Settings {
	out := Settings{}
	for _, m := range []Settings{defaults, s} {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// roleConfig renders the configuration file. It is JSON, which is valid
// YAML, so every value keeps its type without a YAML encoder.
func roleConfig(r Role) ([]byte, error) {
	base := Settings{}
	switch r.Role {
	case MockUpstream:
		base["mock_upstream.listen"] = "127.0.0.1:0"
	case Dev:
		if len(r.Providers) > 0 {
			base["providers"] = r.Providers
		}
	default:
		if len(r.NATS) == 0 {
			return nil, fmt.Errorf("procs: %s: no NATS URLs", r.Name)
		}
		base["nats.url"] = strings.Join(r.NATS, ",")
		base["providers"] = r.Providers
	}
	switch r.Role {
	case Dev:
		base["edge.listen"] = "127.0.0.1:0"
		base["worker.listen"] = "127.0.0.1:0"
		base["coordinator.listen"] = "127.0.0.1:0"
		base["worker.id"] = r.Name
	case Edge:
		base["edge.listen"] = "127.0.0.1:0"
		// Loopback clients of a test need no keys; a test of
		// authentication sets edge.api_keys (and may switch this off).
		base["edge.allow_anonymous"] = true
	case Coordinator:
		base["coordinator.listen"] = "127.0.0.1:0"
	case Worker:
		base["worker.id"] = r.Name
	}
	tree := map[string]any{}
	for _, s := range []Settings{base, r.Settings} {
		for key, value := range s {
			if err := setPath(tree, key, value); err != nil {
				return nil, fmt.Errorf("procs: %s: %w", r.Name, err)
			}
		}
	}
	return json.MarshalIndent(tree, "", "  ")
}

// setPath sets a dotted key in a tree of maps.
func setPath(tree map[string]any, key string, value any) error {
	parts := strings.Split(key, ".")
	for _, part := range parts[:len(parts)-1] {
		next, ok := tree[part]
		if !ok {
			m := map[string]any{}
			tree[part] = m
			tree = m
			continue
		}
		if tree, ok = next.(map[string]any); !ok {
			return fmt.Errorf("setting %q: %q is not a section", key, part)
		}
	}
	tree[parts[len(parts)-1]] = value
	return nil
}

// readyLine matches "relay <role> ready[: URL]", and dev's "relay dev
// ready: edge URL (...)" (see announce in relay/cmd/relay).
func readyLine(role string) func(string) (string, bool) {
	prefix := "relay " + role + " ready"
	return func(line string) (string, bool) {
		rest, ok := strings.CutPrefix(line, prefix)
		if !ok {
			return "", false
		}
		rest = strings.TrimPrefix(rest, ": ")
		if role == Dev {
			rest = strings.TrimPrefix(rest, "edge ")
		}
		url, _, _ := strings.Cut(rest, " ")
		return url, true
	}
}
