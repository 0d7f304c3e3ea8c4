package natsserver

import (
	"crypto/rand"
	"fmt"
	"net"
)

// # Who may connect
//
// The embedded server carries every prompt (relay.requests) and every
// answer, and whoever can publish on a stream's subject can put words in
// its answer. Without credentials any process that reaches its port can
// do both, so `relay dev` gives it a user and a random password of its
// own at each start, which only the roles of the same process know; and a
// listen address beyond loopback, where other machines reach it, is
// refused unless credentials are configured explicitly (a random password
// would lock out the clients such an address is meant for).

// devUser is the user of the random credentials.
const devUser = "relay-dev"

// WithRandomCredentials returns c with a user and a random password when
// it has none configured. A home region's server (Leaf.Listen) gets none:
// nats-server checks a leaf connection without leaf credentials of its own
// against the client credentials, which the other regions cannot know, so
// it stays as before, open on loopback.
func (c Config) WithRandomCredentials() Config {
	if c.User == "" && c.Password == "" && c.Leaf.Listen == "" {
		c.User, c.Password = devUser, rand.Text()
	}
	return c
}

// validateAuth refuses half-set credentials, and a listen address beyond
// loopback without credentials.
func (c Config) validateAuth(prefix string) error {
	if (c.User == "") != (c.Password == "") {
		return fmt.Errorf("%s.user, %s.password: set both or neither", prefix, prefix)
	}
	if c.Listen == "" || c.User != "" {
		return nil
	}
	host, _, _ := net.SplitHostPort(c.Listen) // validated
	if !loopback(host) {
		return fmt.Errorf("%s.listen: %q is reachable from other machines, and the server would carry every prompt to "+
			"anyone who connects: listen on 127.0.0.1, or set %s.user and %s.password (which clients then need)",
			prefix, c.Listen, prefix, prefix)
	}
	return nil
}

// loopback reports whether host is reachable from this machine only; ""
// (every interface) is not.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
