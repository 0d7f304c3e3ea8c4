package upstream

import "testing"

func TestNewTransportKeepsIdleConnectionsPerHost(t *testing.T) {
	for _, tc := range []struct{ asked, want int }{{64, 64}, {1, 2}, {0, 2}} {
		tr := NewTransport(tc.asked)
		if tr.MaxIdleConnsPerHost != tc.want || tr.MaxIdleConns != 0 {
			t.Errorf("NewTransport(%d): %d idle per host, %d in all; want %d per host, no cap in all",
				tc.asked, tr.MaxIdleConnsPerHost, tr.MaxIdleConns, tc.want)
		}
	}
}
