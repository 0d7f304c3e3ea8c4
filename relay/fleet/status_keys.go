package fleet

import (
	"cmp"
	"slices"
	"time"

	"github.com/relaydev/relay/relay/fleet/quota"
)

// KeyStatus is one provider API key as the workers checked it, named by
// its fingerprint (see package apikeys): status never holds a key.
type KeyStatus struct {
	Provider    string `json:"provider"`
	Index       int    `json:"index"`
	Fingerprint string `json:"fingerprint"`
	// State is the worst a worker reports: failed (the provider refused
	// it, and it is not used), then pending, unchecked, verified.
	State     string    `json:"state"`
	Reason    string    `json:"reason,omitempty"`
	CheckedAt time.Time `json:"checked_at,omitzero"`
	// Workers counts the workers that hold the key.
	Workers int `json:"workers"`
}

// keyStateRank orders the states from the best to the worst.
var keyStateRank = map[string]int{"verified": 0, "unchecked": 1, "pending": 2, "failed": 3}

// keysOf merges the workers' key reports: one row per provider and key,
// in the state of the worker that saw the worst.
func keysOf(reports []quota.Report) []KeyStatus {
	type id struct{ provider, fingerprint string }
	rows := map[id]*KeyStatus{}
	for _, r := range reports {
		for p, keys := range r.Keys {
			for _, k := range keys {
				row := rows[id{p, k.Fingerprint}]
				if row == nil {
					row = &KeyStatus{Provider: p, Index: k.Index, Fingerprint: k.Fingerprint, State: k.State, Reason: k.Reason, CheckedAt: k.CheckedAt}
					rows[id{p, k.Fingerprint}] = row
				} else if keyStateRank[k.State] > keyStateRank[row.State] {
					row.State, row.Reason, row.CheckedAt = k.State, k.Reason, k.CheckedAt
				}
				row.Workers++
			}
		}
	}
	out := make([]KeyStatus, 0, len(rows))
	for _, row := range rows {
		out = append(out, *row)
	}
	slices.SortFunc(out, func(a, b KeyStatus) int {
		return cmp.Or(cmp.Compare(a.Provider, b.Provider), cmp.Compare(a.Index, b.Index), cmp.Compare(a.Fingerprint, b.Fingerprint))
	})
	return out
}
