package relaytest

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/relaydev/relay/relay/natsserver"
)

// Cluster starts n embedded servers with JetStream, joined by routes into
// one cluster, and shuts them down when the test ends. It returns once the
// cluster has a meta leader, so streams of up to n replicas can be set up
// (Connect to any server with a Topology of Replicas n).
func Cluster(t testing.TB, n int) []*server.Server {
	t.Helper()
	ports := make([]int, n)
	routes := make([]string, n)
	for i := range ports {
		ports[i] = freePort(t)
		routes[i] = fmt.Sprintf("nats://127.0.0.1:%d", ports[i])
	}
	nodes := make([]*server.Server, n)
	for i := range nodes {
		opts := &server.Options{
			ServerName: fmt.Sprintf("n%d", i+1),
			Host:       "127.0.0.1",
			Port:       -1,
			NoLog:      true,
			NoSigs:     true,
			JetStream:  true,
			StoreDir:   t.TempDir(),
			Cluster: server.ClusterOpts{
				Name: "relaytest",
				Host: "127.0.0.1",
				Port: ports[i],
			},
			Routes:          server.RoutesFromStr(strings.Join(routes, ",")),
			JetStreamLimits: natsserver.Limits,
		}
		s, err := server.NewServer(opts)
		if err != nil {
			t.Fatalf("cluster node %d: %v", i+1, err)
		}
		go s.Start()
		t.Cleanup(func() {
			s.Shutdown()
			s.WaitForShutdown()
		})
		nodes[i] = s
	}
	for i, s := range nodes {
		if !s.ReadyForConnections(30 * time.Second) {
			t.Fatalf("cluster node %d not ready", i+1)
		}
	}
	Eventually(t, 20*time.Second, 20*time.Millisecond, func() bool {
		for _, s := range nodes {
			if s.JetStreamIsLeader() {
				for _, o := range nodes {
					if o.NumRoutes() < n-1 {
						return false
					}
				}
				// Streams are placed only on peers the leader has
				// heard from (online, with JetStream stats): until
				// then an R3 stream fails with "no suitable peers".
				return len(s.JetStreamClusterPeers()) == n
			}
		}
		return false
	})
	return nodes
}

// freePort returns a TCP port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
