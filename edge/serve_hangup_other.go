//go:build !linux

package edge

import "net"

// canWatchHangup: elsewhere a goroutine reads each taken-over connection,
// which then cannot serve another request (serve_keepalive.go).
const canWatchHangup = false

// watchHangup is epoll's (serve_hangup_linux.go): elsewhere a goroutine reads
// each taken-over connection.
func watchHangup(net.Conn, func()) (stop func(drop bool), ok bool) { return nil, false }
