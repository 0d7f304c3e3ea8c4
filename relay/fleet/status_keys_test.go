package fleet

import (
	"reflect"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/fleet/quota"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/relaytest"
)

func TestKeysOfShowsTheWorstAWorkerSaw(t *testing.T) {
	reports := []quota.Report{
		{Node: "w1", Keys: map[string][]quota.APIKey{"p": {
			{Index: 0, Fingerprint: "sha256:aaa", State: "verified"},
			{Index: 1, Fingerprint: "sha256:bbb", State: "pending", Reason: "HTTP 503 Service Unavailable"},
		}}},
		{Node: "w2", Keys: map[string][]quota.APIKey{"p": {
			{Index: 0, Fingerprint: "sha256:aaa", State: "verified"},
			{Index: 1, Fingerprint: "sha256:bbb", State: "failed", Reason: "refused: HTTP 401 Unauthorized"},
		}, "o": {{Index: 0, Fingerprint: "sha256:ccc", State: "unchecked"}}}},
		{Node: "edge"},
	}
	want := []KeyStatus{
		{Provider: "o", Index: 0, Fingerprint: "sha256:ccc", State: "unchecked", Workers: 1},
		{Provider: "p", Index: 0, Fingerprint: "sha256:aaa", State: "verified", Workers: 2},
		{Provider: "p", Index: 1, Fingerprint: "sha256:bbb", State: "failed", Reason: "refused: HTTP 401 Unauthorized", Workers: 2},
	}
	if got := keysOf(reports); !reflect.DeepEqual(got, want) {
		t.Fatalf("keysOf = %+v\nwant %+v", got, want)
	}
}

// A worker's key checks reach the status through its gate's quota report.
func TestSharedGateReportsKeysToStatus(t *testing.T) {
	g, js := sharedGate(t, provider.Config{})
	g.ReportKeys(func() map[string][]quota.APIKey {
		return map[string][]quota.APIKey{"p": {{Index: 0, Fingerprint: "sha256:abc", State: "failed", Reason: "refused: HTTP 401 Unauthorized"}}}
	})
	relaytest.Eventually(t, 10*time.Second, 20*time.Millisecond, func() bool {
		st, err := ReadStatus(t.Context(), js)
		return err == nil && len(st.Keys) == 1 && st.Keys[0] == KeyStatus{Provider: "p", Fingerprint: "sha256:abc", State: "failed",
			Reason: "refused: HTTP 401 Unauthorized", Workers: 1}
	})
}
