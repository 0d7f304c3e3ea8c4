package fleet

import (
	"reflect"
	"testing"

	"github.com/relaydev/relay/relay/fleet/quota"
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
