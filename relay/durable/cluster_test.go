package durable

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/streams"
)

// On three servers with every stream on three replicas, what one edge
// was acknowledged every other edge reads at once, through whichever
// server it is connected to: a created stream opens, an append is in the
// next read, a deleted stream is gone. Direct gets alone answer from a
// replica that may not have applied it yet.
func TestReadsSeeAcknowledgedWritesOnReplicas(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nodes := relaytest.Cluster(t, 3)
	var ss []*Store
	for _, n := range nodes {
		nc, js := relaytest.Connect(t, n, streams.Topology{Replicas: 3})
		ss = append(ss, New(js, chunklog.NewReader(nc, ""), func(context.Context) int { return 0 }))
	}
	const rounds = 200
	for i := range rounds {
		w := ss[i%3]
		path := fmt.Sprintf("/ryw/%d", i)
		st, _, _, err := w.Create(ctx, "acme", path, Spec{ContentType: "text/plain"}, []byte("first "), 0)
		if err != nil {
			t.Fatalf("round %d: create: %v", i, err)
		}
		for k, r := range ss {
			if _, err := r.Open(ctx, "acme", path); err != nil {
				t.Fatalf("round %d: open through server %d right after the create: %v", i, k+1, err)
			}
		}
		if _, err := ss[(i+1)%3].Append(ctx, st, Append{Data: []byte("second")}); err != nil {
			t.Fatalf("round %d: append: %v", i, err)
		}
		for k, r := range ss {
			p, err := r.Read(ctx, st, Start, 1<<20, 1<<20)
			if err != nil {
				t.Fatalf("round %d: read through server %d: %v", i, k+1, err)
			}
			got := ""
			for _, c := range p.Chunks {
				got += string(c.Data)
			}
			if got != "first second" || !p.UpToDate {
				t.Fatalf("round %d: read through server %d right after the append: %q (up to date %v), want %q", i, k+1, got, p.UpToDate, "first second")
			}
		}
		if err := ss[(i+2)%3].Delete(ctx, st); err != nil {
			t.Fatalf("round %d: delete: %v", i, err)
		}
		for k, r := range ss {
			if _, err := r.Open(ctx, "acme", path); !errors.Is(err, ErrNotFound) {
				t.Fatalf("round %d: open through server %d right after the delete: %v, want ErrNotFound", i, k+1, err)
			}
		}
	}
}
