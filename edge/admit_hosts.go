package edge

import (
	"errors"
	"net"
	"net/http"
	"strings"

	"github.com/relaydev/relay/relay/wire"
)

// # Host names (DNS rebinding)
//
// An edge that serves anonymous requests (no api_keys, or
// allow_anonymous) trusts whoever can reach it. A page on evil.example can
// make itself that whoever: its name, re-resolved to 127.0.0.1, makes the
// browser send the page's requests to the edge as same-origin ones, and
// read the answers. The browser still sends Host: evil.example, so such an
// edge answers only Hosts it knows: IP addresses (a page on an IP address
// has no name to rebind), localhost and its subdomains (which browsers
// resolve to loopback themselves), the host of edge.listen, and
// edge.allowed_hosts ("*" switches the check off). Others get a 403.
// /healthz and /readyz answer any Host, for probes that use the pod's
// name. With API keys alone, a page has no key to send, and no check is
// needed.

// CodeHostNotAllowed answers a request to an anonymous edge under a Host
// it does not know (403).
const CodeHostNotAllowed = "host_not_allowed"

// hostPolicy is the set of names an anonymous edge answers to.
type hostPolicy struct {
	any   bool
	names map[string]bool
	// suffixes are the allowed "*.example.com" names, as ".example.com".
	suffixes []string
}

func newHostPolicy(listen string, allowed []string) hostPolicy {
	p := hostPolicy{names: map[string]bool{"localhost": true}, suffixes: []string{".localhost"}}
	if host, _, err := net.SplitHostPort(listen); err == nil && host != "" {
		p.names[strings.ToLower(host)] = true
	}
	for _, h := range allowed {
		h = strings.ToLower(strings.TrimSuffix(h, "."))
		switch {
		case h == "*":
			p.any = true
		case strings.HasPrefix(h, "*."):
			p.suffixes = append(p.suffixes, h[1:])
		default:
			p.names[h] = true
		}
	}
	return p
}

// allows reports whether the edge answers to host, a Host header (a port
// is ignored).
func (p hostPolicy) allows(host string) bool {
	if p.any {
		return true
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if net.ParseIP(host) != nil || p.names[host] {
		return true
	}
	for _, s := range p.suffixes {
		if strings.HasSuffix(host, s) {
			return true
		}
	}
	return false
}

// validateHost accepts a name, "*.name" or "*".
func validateHost(h string) error {
	name := strings.TrimPrefix(h, "*.")
	if h == "*" {
		return nil
	}
	if name == "" || strings.ContainsAny(name, "/:*@ ") {
		return errors.New(h + ": want a host name (app.example.com), *.example.com or *")
	}
	return nil
}

// withAllowedHosts refuses requests under a Host the edge does not know,
// when it serves anonymous ones.
func (s *Server) withAllowedHosts(next http.Handler) http.Handler {
	if !s.auth.anonymous {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.hosts.allows(r.Host) || r.URL.Path == "/healthz" || r.URL.Path == "/readyz" {
			next.ServeHTTP(w, r)
			return
		}
		writeError(w, &wire.Error{
			Message: "this edge serves requests without an API key, so it answers only the host names it knows, " +
				"and " + quoteHost(r.Host) + " is not one (add it to edge.allowed_hosts)",
			Type:   wire.TypeInvalidRequest,
			Param:  "Host",
			Code:   CodeHostNotAllowed,
			Status: http.StatusForbidden,
		})
	})
}

// quoteHost shows a Host header in a message, bounded.
func quoteHost(h string) string {
	if len(h) > 100 {
		h = h[:100] + "…"
	}
	return `"` + strings.ToValidUTF8(h, "?") + `"`
}
