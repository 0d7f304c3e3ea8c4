package wire

import (
	"testing"
	"time"
)

func TestHeartbeatTimeout(t *testing.T) {
	for _, tc := range []struct {
		ms   int64
		want time.Duration
	}{
		{0, DefaultLivenessTimeout},
		{-5, DefaultLivenessTimeout},
		{1, minLivenessTimeout},
		{2500, 2500 * time.Millisecond},
	} {
		if got := (Heartbeat{TimeoutMS: tc.ms}).Timeout(); got != tc.want {
			t.Errorf("TimeoutMS %d: Timeout() = %v, want %v", tc.ms, got, tc.want)
		}
	}
}

func TestHandoverKeyNamesTheDelivery(t *testing.T) {
	a := Delivery{Seq: 12, Delivered: 1}
	b := Delivery{Seq: 12, Delivered: 2}
	if a.HandoverKey() == b.HandoverKey() || a.HandoverKey() != "12.1" {
		t.Fatalf("keys %q, %q: want one per delivery", a.HandoverKey(), b.HandoverKey())
	}
}
