//go:build !linux

package edge

import "net"

// watchHangup is epoll's (hangup_linux.go): elsewhere a goroutine reads
// each taken-over connection.
func watchHangup(net.Conn, func()) (stop func(), ok bool) { return nil, false }
