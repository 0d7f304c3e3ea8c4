package main

import (
	"fmt"
	"strings"
	"time"
)

// cpuClock is a process whose processor time can be read: a role
// (procs.Process) or the bare proxy.
type cpuClock interface {
	CPUTime() (time.Duration, error)
}

// part is one role of a system under load, with its processes.
type part struct {
	name  string
	procs []cpuClock
}

// relayParts are the processes that carry the relay's streams when every
// role is a process of its own: edge, workers and nats-server. The fake
// upstream and the clients are left out: they do the same work whatever
// carries the streams.
func (b *bench) relayParts(sys *system) []part {
	workers := make([]cpuClock, len(sys.workers))
	for i, w := range sys.workers {
		workers[i] = w
	}
	var servers []cpuClock
	for _, p := range b.natsParts() {
		servers = append(servers, p)
	}
	return []part{{"edge", []cpuClock{sys.edge}}, {"workers", workers}, {"nats", servers}}
}

// partsMeter reads each part's processor time at its start, so that
// used tells what a load cost each.
type partsMeter struct {
	parts []part
	start [][]time.Duration
}

func meterParts(parts []part) *partsMeter {
	m := &partsMeter{parts: parts, start: make([][]time.Duration, len(parts))}
	for i, p := range parts {
		for _, c := range p.procs {
			t, _ := c.CPUTime()
			m.start[i] = append(m.start[i], t)
		}
	}
	return m
}

// used is the processor time each part used since the meter started, in
// the order of the parts.
func (m *partsMeter) used() []time.Duration {
	out := make([]time.Duration, len(m.parts))
	for i, p := range m.parts {
		for j, c := range p.procs {
			if t, err := c.CPUTime(); err == nil {
				out[i] += t - m.start[i][j]
			}
		}
	}
	return out
}

// cpuCost is what a load cost the parts that carried it, per delivered
// chunk.
type cpuCost struct {
	names []string
	used  []time.Duration
	// chunks are the content events the clients received.
	chunks int
}

// add sums o, a load on the same parts, into c.
func (c *cpuCost) add(o cpuCost) {
	if c.names == nil {
		c.names, c.used = o.names, make([]time.Duration, len(o.used))
	}
	for i, u := range o.used {
		c.used[i] += u
	}
	c.chunks += o.chunks
}

// perChunk is the processor time of all parts per delivered chunk, in
// µs; zero without chunks.
func (c cpuCost) perChunk() float64 {
	var total time.Duration
	for _, u := range c.used {
		total += u
	}
	return c.micros(total)
}

// partPerChunk is the processor time of the part named name per
// delivered chunk, in µs; zero without chunks or such a part.
func (c cpuCost) partPerChunk(name string) float64 {
	for i, n := range c.names {
		if n == name {
			return c.micros(c.used[i])
		}
	}
	return 0
}

func (c cpuCost) micros(d time.Duration) float64 {
	if c.chunks == 0 {
		return 0
	}
	return float64(d) / float64(time.Microsecond) / float64(c.chunks)
}

// String gives the total and each part, in µs per chunk.
func (c cpuCost) String() string {
	parts := make([]string, len(c.names))
	for i, n := range c.names {
		parts[i] = fmt.Sprintf("%s %s", n, num(c.micros(c.used[i])))
	}
	return fmt.Sprintf("%s µs per chunk (%s) over %d chunks", num(c.perChunk()), strings.Join(parts, ", "), c.chunks)
}
