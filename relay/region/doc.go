// Package region is the multi-region layer: one JetStream domain per
// region, joined by leaf nodes, with the cluster-wide provider state
// (wire.SharedStateBuckets) mirrored from the home region and written
// through to it. Streams, requests and chunks never leave their region.
//
// Every region runs its own NATS with its own JetStream domain; the home
// region's servers accept leaf node connections from the others
// (natsserver.LeafConfig, configs/regions/). What is region-local and
// what is shared:
//
//	region B (leaf, domain "b")                    region A (home, domain "a")
//	RELAY_REQUESTS, RELAY_CHUNKS, relay_streams,   the same, for A's own streams
//	relay_handovers, relay.> core subjects
//	   … never cross the leaf connection (RegionLocalSubjects) …
//
//	KV <shared> ── mirror of ────────────────────▶ KV <shared>   (wire.SharedStateBuckets)
//	  reads, watches: local (mirror)
//	  writes: $JS.a.API.$KV.<shared>.<key> ───────▶ stored in A, mirrored back
//	KV <shared>_overlay: B's writes while A is unreachable
//
// A region that is not the home sees each shared bucket through
// RegionalKV: the newer (by stored time) of the mirror's and the overlay's
// entry for each key. Writes go to the home; while the home is
// unreachable they go to the overlay, so the region still acts on its own
// failures. Once the home answers again, every process of the region
// reconciles the overlay into the home, key by key, last writer wins by
// stored time (Regional.Run), and removes each overlay entry once the
// mirror has caught up. configs/README.md "Regions" has the whole contract.
package region
