package config

import (
	"fmt"
	"net"
	"strconv"
)

// validatePprofListen checks pprof_listen: empty, or host:port with an
// explicit host and a numeric port (0: a free one). ":6060" is refused
// because it listens on every interface, and a profiling endpoint should
// only face the network when its host says so (0.0.0.0:6060).
func validatePprofListen(addr string) error {
	if addr == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("pprof_listen: %q: %v", addr, err)
	}
	if host == "" {
		return fmt.Errorf("pprof_listen: %q has no host: give 127.0.0.1%s for this machine only, or 0.0.0.0%s to accept profiling requests from anywhere", addr, addr, addr)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("pprof_listen: %q: port %q is not a number from 0 to 65535", addr, port)
	}
	return nil
}
