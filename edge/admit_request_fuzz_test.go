package edge

import "testing"

// fuzzLimits are the limits of the request fuzz targets (the chat
// request's are relay/dialect/chat's): both models are served, the key may
// use testModel only.
var fuzzLimits = limits{
	served:      func(m string) bool { return m == testModel || m == otherModel },
	allowed:     func(m string) bool { return m == testModel },
	maxMessages: 4,
	maxTokens:   100,
}

// FuzzDisconnectPolicy: X-Relay-On-Disconnect comes from clients. A policy
// parses or is refused with a message, and what parses renders back to
// itself.
func FuzzDisconnectPolicy(f *testing.F) {
	for _, s := range []string{"continue", "cancel_after 30s", "cancel_after 1h2m3.5s", "cancel_after", "cancel_after -1s", " ", "cancel_after 1e9h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := parseDisconnectPolicy(s)
		if err != nil {
			if err.Error() == "" || p != (DisconnectPolicy{}) {
				t.Fatalf("%q: %+v, %v", s, p, err)
			}
			return
		}
		if p.CancelAfter < 0 {
			t.Fatalf("%q: negative %v", s, p.CancelAfter)
		}
		if back, err := parseDisconnectPolicy(p.String()); err != nil || back != p {
			t.Fatalf("%q: %v renders as %q, which parses as %+v, %v", s, p, p.String(), back, err)
		}
	})
}
