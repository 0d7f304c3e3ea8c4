package streams

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/wire"
)

// # Leaders
//
// A chunk stream's raft leader takes every round of its partition, so the
// partitions add capacity only on as many servers as lead them. JetStream
// picks a new stream's leader at random among its replicas (three
// partitions on three servers land on three leaders about one time in
// five), and a server that restarts leads nothing until elections move
// leaders back by chance. SpreadLeaders evens them out; the active
// coordinator calls it now and then.

// LeaderMove is a chunk stream's leadership asked to go from one server
// to another.
type LeaderMove struct{ Stream, From, To string }

// SpreadLeaders moves the leadership of one partition from a server that
// leads more partitions of its kind than another of that partition's
// replicas does, by two or more, to that replica (a stepdown that prefers
// it: a short election of that stream alone). The generations' partitions
// and the Durable Streams' are evened out each among themselves, since
// they carry different loads. It returns the move, or ok false when the
// leaders are as even as the replicas allow. One move a call, so that the
// next call sees where the election put the leader.
func SpreadLeaders(ctx context.Context, js jetstream.JetStream) (m LeaderMove, ok bool, err error) {
	n, err := Partitions(ctx, js)
	if err != nil {
		return m, false, err
	}
	ks := chunkPartitions(n)
	for _, kind := range [][]int{ks[:n], ks[n:]} {
		if m, ok, err = spreadLeaders(ctx, js, kind); ok || err != nil {
			return m, ok, err
		}
	}
	return m, false, nil
}

// spreadLeaders is SpreadLeaders among the partitions ks.
func spreadLeaders(ctx context.Context, js jetstream.JetStream, ks []int) (m LeaderMove, ok bool, err error) {
	type partition struct {
		name, leader string
		current      []string // replicas that are current and online
	}
	var parts []partition
	leads := map[string]int{}
	for _, k := range ks {
		s, err := js.Stream(ctx, wire.ChunkStreamName(k))
		if err != nil {
			return m, false, err
		}
		c := s.CachedInfo().Cluster
		if c == nil || c.Leader == "" {
			continue // one server, or an election under way
		}
		p := partition{name: wire.ChunkStreamName(k), leader: c.Leader}
		for _, r := range c.Replicas {
			if r.Current && !r.Offline {
				p.current = append(p.current, r.Name)
				leads[r.Name] += 0
			}
		}
		leads[c.Leader]++
		parts = append(parts, p)
	}
	// The busiest leader's partitions first, each to its least busy replica.
	slices.SortStableFunc(parts, func(a, b partition) int { return leads[b.leader] - leads[a.leader] })
	for _, p := range parts {
		to := ""
		for _, r := range p.current {
			if leads[r] <= leads[p.leader]-2 && (to == "" || leads[r] < leads[to]) {
				to = r
			}
		}
		if to == "" {
			continue
		}
		m = LeaderMove{Stream: p.name, From: p.leader, To: to}
		return m, true, stepDown(ctx, js, m)
	}
	return m, false, nil
}

// stepDown asks m.Stream's leader to hand over to m.To.
func stepDown(ctx context.Context, js jetstream.JetStream, m LeaderMove) error {
	body, _ := json.Marshal(map[string]any{"placement": map[string]string{"preferred": m.To}})
	msg, err := js.Conn().RequestWithContext(ctx, "$JS.API.STREAM.LEADER.STEPDOWN."+m.Stream, body)
	if err == nil {
		var resp struct {
			Error *jetstream.APIError `json:"error"`
		}
		if err = json.Unmarshal(msg.Data, &resp); err == nil && resp.Error != nil {
			err = resp.Error
		}
	}
	if err != nil {
		return fmt.Errorf("streams: leader of %s to %s: %w", m.Stream, m.To, err)
	}
	return nil
}
