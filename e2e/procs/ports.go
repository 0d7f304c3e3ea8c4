package procs

import (
	"fmt"
	"net"
)

// FreePorts returns n distinct free TCP ports on 127.0.0.1. Servers that
// must know each other's addresses before they start (nats-server routes)
// need their ports picked ahead; all n listeners are held until every port
// is chosen, so the kernel cannot hand out the same one twice.
func FreePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("procs: free port: %w", err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
