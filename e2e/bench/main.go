// Command bench measures what the relay's durable hops cost: it
// starts a nats-server, the fake upstream and the relay's roles as separate
// processes (e2e/procs), drives them over loopback, and prints one
// markdown table in which every figure stands next to a baseline measured
// in the same run on the same machine.
//
//	go -C e2e run ./bench              # about 8 minutes on two cores
//	go -C e2e run ./bench --quick      # under a minute; what CI runs
//	go -C e2e run ./bench --json out.json --only latency,resume
//	go -C e2e run ./bench --hedge      # hedging against a heavy-tailed upstream (hedge.go)
//
// Progress goes to stderr, the table to stdout. Every process, connection
// and wait is bounded; the processes die with the benchmark.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/e2e/procs"
)

// bench is one run: the harness, the shared nats-server, the benchmark's
// own connection to it, and the plan.
type bench struct {
	plan plan
	h    *procs.Harness
	// natsProcs are the nats-servers every phase shares (one, or a
	// cluster of three with --cluster); nats their URLs.
	natsProcs []*procs.NATS
	nats      []string
	nc        *nats.Conn
	js        jetstream.JetStream
	log       *progress
	// cluster: the phases share servers nats-servers and R3 streams.
	cluster bool
	servers int
	// serverCPU caps each nats-server's CPU, in cores (0: no cap), and
	// caps are the control groups that do it (cpucap.go).
	serverCPU float64
	caps      []*cpuCap
	// natsCPUAtStart is each server's CPU time once the cluster was up,
	// for the spread over the run.
	natsCPUAtStart []time.Duration
}

// phase is one group of figures.
type phase struct {
	name string
	run  func(*bench, context.Context) ([]figure, error)
}

// phases run in this order, the heaviest (concurrent streams) last.
var phases = []phase{
	{"throughput", (*bench).throughput},
	{"latency", (*bench).latency},
	{"openloop", (*bench).openLoop},
	{"rounds", (*bench).rounds},
	{"resume", (*bench).resume},
	{"durable", (*bench).durable},
	{"failover", (*bench).failover},
	{"breaker", (*bench).breakers},
	{"memory", (*bench).workerMemory},
	{"concurrent", (*bench).concurrent},
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	quick := flag.Bool("quick", false, "small counts; finishes within a minute (CI)")
	jsonPath := flag.String("json", "", "also write the figures as JSON to `file`")
	only := flag.String("only", "", "comma-separated phases to run: "+phaseNames())
	keep := flag.Bool("keep", false, "keep the process logs and JetStream store (the directory is printed)")
	streams := flag.Int("streams", 0, "concurrent SSE streams on one edge (zero: 10,000; 1,000 with --quick)")
	levels := flag.String("levels", "", "comma-separated concurrencies of the latency phase, e.g. 100 (zero: the plan's)")
	hedge := flag.Bool("hedge", false, "run only the hedging mode: time to first token with and without first_token_sla")
	hedgeRequests := flag.Int("hedge-requests", 0, "requests of each model in the hedging mode (zero: 400)")
	fastOnly := flag.Bool("fast-only", false, "the concurrent phase runs only its 1 token/s run (no paced run, so no memory figures)")
	cluster := flag.Bool("cluster", false, "the phases share a cluster of three nats-servers, and the roles keep every stream on three replicas (streams.replicas unset), as in a replicated deployment; the rows marked one process still use relay dev's embedded server")
	capacity := flag.Float64("capacity", 0, "the open-loop phase's loads are fractions of this many requests/s instead of the relay's paced capacity measured in the run, so that runs of two builds offer the same arrivals (zero: measured)")
	servers := flag.Int("servers", 3, "with --cluster, the cluster's nats-servers (at least 3; the streams keep three replicas)")
	serverCPU := flag.Float64("server-cpu", 0, "hold each nats-server to this many cores (a cgroup CPU quota, as root), so that each stands for a machine of its own (zero: no cap)")
	answerTokens := flag.Int("answer-tokens", 0, "the open-loop phase's answers have this many tokens, at its pace (zero: 20)")
	profile := flag.String("profile", "", "write CPU profiles of the open-loop phase's edge and workers, taken while they take the first load, and the memory phase's worker's heap and goroutines into `dir` (see profile.go)")
	h2c := flag.Bool("h2c", false, "the open-loop and concurrent phases' relay and bare proxy call the fake upstreams over h2c (HTTP/2 without TLS), as a TLS provider is called over HTTP/2")
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", flag.Arg(0))
	}
	p := defaultPlan()
	if *quick {
		p = quickPlan()
	}
	if *streams > 0 {
		p.concStreams = *streams
	}
	p.h2c = *h2c
	p.profileDir = *profile
	if *capacity < 0 {
		return fmt.Errorf("--capacity: %v is negative", *capacity)
	}
	p.openLoopCapacity = *capacity
	if *answerTokens < 0 {
		return fmt.Errorf("--answer-tokens: %d is negative", *answerTokens)
	}
	p.openLoopTokens = *answerTokens
	p.concFastOnly = *fastOnly
	var err error
	if *levels != "" {
		if p.levels, err = p.pickLevels(*levels); err != nil {
			return err
		}
	}
	selected, err := selectPhases(*only)
	if err != nil {
		return err
	}

	// The whole run is bounded, with room over the plan's nominal length.
	budget := 14 * time.Minute
	if *quick {
		budget = 3 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	log := &progress{w: os.Stderr, start: time.Now()}
	h, err := procs.New(ctx, procs.Options{KeepDir: *keep, Logf: log.printf})
	if err != nil {
		return err
	}
	defer h.Close()
	if *servers < 3 || *serverCPU < 0 {
		return fmt.Errorf("--servers %d, --server-cpu %v: want at least 3 servers and a cap not negative", *servers, *serverCPU)
	}
	b := &bench{plan: p, h: h, log: log, cluster: *cluster, servers: *servers, serverCPU: *serverCPU}
	// A control group is removed once empty: after the harness stopped
	// the servers (Close may be called twice).
	defer func() {
		h.Close()
		for _, c := range b.caps {
			c.remove()
		}
	}()
	if *hedge {
		return b.hedgeMode(ctx, cmp.Or(*hedgeRequests, hedgeSpec.defaultN), os.Stdout)
	}
	rep, err := b.run(ctx, selected)
	if err != nil {
		return err
	}
	rep.Header.Duration = time.Since(log.start).Round(time.Second).String()
	rep.Header.Load += ", after " + loadAverage()
	slices.SortStableFunc(rep.Figures, func(a, b figure) int { return a.rank - b.rank })
	rep.writeMarkdown(os.Stdout)
	if *jsonPath != "" {
		if err := rep.writeJSON(*jsonPath); err != nil {
			return err
		}
	}
	if len(rep.Failures) > 0 {
		return fmt.Errorf("%d phase(s) failed", len(rep.Failures))
	}
	return nil
}

// connect starts the nats-server (or cluster) every phase shares and
// connects the benchmark to it; the caller closes b.nc.
func (b *bench) connect(ctx context.Context) error {
	var err error
	if b.cluster {
		b.natsProcs, err = b.h.StartNATSCluster(ctx, b.servers, procs.NATSOptions{})
	} else {
		var n *procs.NATS
		n, err = b.h.StartNATS(ctx, procs.NATSOptions{})
		b.natsProcs = []*procs.NATS{n}
	}
	if err != nil {
		return err
	}
	if b.serverCPU > 0 {
		for _, n := range b.natsProcs {
			c, err := capCPU(n.Process, b.serverCPU)
			if err != nil {
				return err
			}
			b.caps = append(b.caps, c)
		}
	}
	for _, n := range b.natsProcs {
		used, _ := n.CPUTime()
		b.natsCPUAtStart = append(b.natsCPUAtStart, used)
	}
	b.nats = procs.URLs(b.natsProcs...)
	if b.nc, err = nats.Connect(strings.Join(b.nats, ","), nats.Name("relay-bench")); err != nil {
		return err
	}
	b.js, err = jetstream.New(b.nc)
	return err
}

// natsParts are the nats-server processes, for the CPU figures.
func (b *bench) natsParts() []*procs.Process {
	out := make([]*procs.Process, len(b.natsProcs))
	for i, n := range b.natsProcs {
		out[i] = n.Process
	}
	return out
}

func (b *bench) run(ctx context.Context, selected []phase) (*report, error) {
	if err := b.connect(ctx); err != nil {
		return nil, err
	}
	defer b.nc.Close()
	rep := &report{Header: machineHeader(b.plan.mode)}
	rep.Header.NATSServer = b.nc.ConnectedServerVersion()
	rep.Header.Storage = "one server, file storage, R1, every role a separate process on 127.0.0.1, except the rows marked one process"
	if b.cluster {
		rep.Header.Storage = fmt.Sprintf("a cluster of %d servers, file storage, R3 (streams.replicas unset), every role a separate process on 127.0.0.1, except the rows marked one process (relay dev: one embedded server, R1)", b.servers)
	}
	if b.serverCPU > 0 {
		rep.Header.Storage += fmt.Sprintf("; each nats-server held to %.2f cores (a cgroup CPU quota)", b.serverCPU)
	}
	defer func() { rep.Header.ServerCPU = b.serverSpread() }()
	for _, ph := range selected {
		if ctx.Err() != nil {
			rep.Failures = append(rep.Failures, fmt.Sprintf("%s: %v", ph.name, ctx.Err()))
			continue
		}
		b.log.printf("phase %s", ph.name)
		start := time.Now()
		figs, err := ph.run(b, ctx)
		rep.Figures = append(rep.Figures, figs...)
		if err != nil {
			b.log.printf("phase %s failed: %v", ph.name, err)
			rep.Failures = append(rep.Failures, fmt.Sprintf("%s: %v", ph.name, err))
			continue
		}
		b.log.printf("phase %s done in %v", ph.name, time.Since(start).Round(100*time.Millisecond))
	}
	return rep, nil
}

func phaseNames() string {
	names := make([]string, len(phases))
	for i, ph := range phases {
		names[i] = ph.name
	}
	return strings.Join(names, ",")
}

// selectPhases picks the named phases, in the order of phases.
func selectPhases(only string) ([]phase, error) {
	if only == "" {
		return phases, nil
	}
	want := map[string]bool{}
	for _, name := range strings.Split(only, ",") {
		want[strings.TrimSpace(name)] = true
	}
	var out []phase
	for _, ph := range phases {
		if want[ph.name] {
			out = append(out, ph)
			delete(want, ph.name)
		}
	}
	for name := range want {
		return nil, errors.New("unknown phase " + name + "; phases: " + phaseNames())
	}
	return out, nil
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
