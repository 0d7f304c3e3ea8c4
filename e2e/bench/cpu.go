package main

import (
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/relaydev/relay/e2e/procs"
)

// cpuMeter measures the processor time each part of the system uses during
// a load: every figure here is bound by two shared cores, and where the
// cores went says what bounds it.
type cpuMeter struct {
	parts map[string][]*procs.Process // by part: edge, workers, nats, upstream; or relay (one process), upstream
	start map[*procs.Process]time.Duration
	self  time.Duration
	t0    time.Time
}

func (b *bench) meterCPU(sys *system) *cpuMeter {
	m := &cpuMeter{
		parts: map[string][]*procs.Process{"edge": {sys.edge}, "workers": sys.workers, "nats": b.natsParts()},
		start: map[*procs.Process]time.Duration{},
		self:  selfCPU(),
		t0:    time.Now(),
	}
	if sys.oneProcess {
		m.parts = map[string][]*procs.Process{"relay": {sys.edge}}
	}
	for _, p := range sys.mocks {
		m.parts["upstream"] = append(m.parts["upstream"], p)
	}
	for _, ps := range m.parts {
		for _, p := range ps {
			m.start[p], _ = p.CPUTime()
		}
	}
	return m
}

// String reports the cores used since the meter started, in total and by
// part ("client" is the benchmark's own process).
func (m *cpuMeter) String() string {
	wall := time.Since(m.t0).Seconds()
	cores := func(d time.Duration) float64 { return d.Seconds() / wall }
	var total float64
	var parts []string
	for _, name := range []string{"relay", "edge", "workers", "nats", "upstream"} {
		if _, ok := m.parts[name]; !ok {
			continue
		}
		var used time.Duration
		for _, p := range m.parts[name] {
			now, err := p.CPUTime()
			if err != nil {
				continue // exited (a killed worker)
			}
			used += now - m.start[p]
		}
		total += cores(used)
		parts = append(parts, fmt.Sprintf("%s %.2f", name, cores(used)))
	}
	client := cores(selfCPU() - m.self)
	total += client
	parts = append(parts, fmt.Sprintf("client %.2f", client))
	return fmt.Sprintf("%.2f cores (%s)", total, strings.Join(parts, ", "))
}

// selfCPU is the processor time this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
