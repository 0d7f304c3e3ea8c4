package edge

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/relaydev/relay/edge/durable"
)

// # CORS
//
// Browser pages on the origins in Config.CORSAllowedOrigins ("*": any) may
// call the API: their requests get Access-Control-Allow-Origin (the page's
// origin) and Access-Control-Expose-Headers naming the relay's response
// headers, so a page can read X-Relay-Stream-Id and X-Relay-Resume-Token.
// A preflight (OPTIONS with Access-Control-Request-Method) is answered
// here, before authentication, with 204 and the methods, the requested
// headers and a max age; a preflight from another origin gets 403. The
// API authenticates with a header, never a cookie, so no credentials mode
// is offered. WebSocket upgrades, which CORS does not cover, are accepted
// from the same origins, from the edge's own origin, and from clients that
// send no Origin (not browsers).

// exposedHeaders are the response headers a page on an allowed origin may
// read.
var exposedHeaders = strings.Join(append([]string{
	"X-Relay-Stream-Id", HeaderResumeToken, HeaderIdempotentReplayed, "Retry-After", "Location",
}, durable.ExposedHeaders...), ", ")

// corsMaxAge is how long a browser may cache a preflight answer, in
// seconds.
const corsMaxAge = "600"

// CodeOriginNotAllowed answers a preflight from an origin not allowed.
const CodeOriginNotAllowed = "origin_not_allowed"

type corsPolicy struct {
	any     bool
	origins map[string]bool
}

func newCORSPolicy(origins []string) corsPolicy {
	c := corsPolicy{origins: map[string]bool{}}
	for _, o := range origins {
		if o == "*" {
			c.any = true
		}
		c.origins[strings.ToLower(strings.TrimSuffix(o, "/"))] = true
	}
	return c
}

func (c corsPolicy) allowed(origin string) bool {
	return origin != "" && (c.any || c.origins[strings.ToLower(origin)])
}

// validateOrigin accepts "*" and scheme://host[:port].
func validateOrigin(o string) error {
	if o == "*" {
		return nil
	}
	u, err := url.Parse(strings.TrimSuffix(o, "/"))
	switch {
	case err != nil:
		return err
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New(o + ": want http://host[:port], https://host[:port] or *")
	case u.Host == "" || u.Path != "" || u.RawQuery != "" || u.User != nil || u.Fragment != "":
		return errors.New(o + ": an origin is scheme://host[:port], without a path")
	}
	return nil
}

// withCORS answers preflights and marks responses to allowed origins.
func (s *Server) withCORS(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" {
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h.Add("Vary", "Origin")
		preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
		if !s.cors.allowed(origin) {
			if preflight {
				e := invalid("Origin", CodeOriginNotAllowed, "the origin %q is not allowed (edge.cors_allowed_origins)", origin)
				e.Status = http.StatusForbidden
				writeError(w, e)
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		h.Set("Access-Control-Allow-Origin", origin)
		if !preflight {
			h.Set("Access-Control-Expose-Headers", exposedHeaders)
			next.ServeHTTP(w, r)
			return
		}
		h.Add("Vary", "Access-Control-Request-Method")
		h.Add("Vary", "Access-Control-Request-Headers")
		h.Set("Access-Control-Allow-Methods", "GET, HEAD, POST, PUT, DELETE")
		if req := r.Header.Get("Access-Control-Request-Headers"); req != "" && validHeaderList(req) {
			// Authentication is a header, never a cookie: any header a
			// page asks to send (the OpenAI SDK's x-stainless-* among
			// them) is harmless.
			h.Set("Access-Control-Allow-Headers", req)
		}
		h.Set("Access-Control-Max-Age", corsMaxAge)
		w.WriteHeader(http.StatusNoContent)
	})
}

// validHeaderList accepts a comma-separated list of header names.
func validHeaderList(s string) bool {
	if len(s) > 1024 {
		return false
	}
	return strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_, ", r))
	}) < 0
}

// checkOrigin decides a WebSocket upgrade: no Origin (not a browser), the
// edge's own origin, or an allowed one.
func (s *Server) checkOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" || s.cors.allowed(origin) {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && strings.EqualFold(u.Host, r.Host)
}
