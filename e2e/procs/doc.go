// Package procs runs the relay as real operating-system processes on
// loopback: nats-server nodes, the fake upstream, edges, workers and the
// coordinator, each from a binary built once per Harness. It is shared by
// the process-kill tests and the benchmark (e2e/bench), which need what an
// in-process harness cannot give: SIGKILL, SIGSTOP and SIGTERM delivered
// for real, and the resident memory of one role.
//
//	h, err := procs.New(ctx, procs.Options{Dir: t.TempDir(), Logf: t.Logf})
//	defer h.Close()
//	n, _ := h.StartNATS(ctx, procs.NATSOptions{})
//	mock, _ := h.Start(ctx, procs.Role{Role: procs.MockUpstream,
//		Settings: procs.Settings{"mock_upstream.token_interval": "-1ns"}})
//	w, _ := h.Start(ctx, procs.Role{Role: procs.Worker, NATS: n.URLs(),
//		Providers: []procs.Provider{mock.Provider("mock", "mock-1")}})
//	e, _ := h.Start(ctx, procs.Role{Role: procs.Edge, NATS: n.URLs(),
//		Providers: []procs.Provider{mock.Provider("mock", "mock-1")}})
//	// POST e.URL + "/v1/chat/completions" ...; w.Kill(); h.Restart(ctx, w) ...
//
// Dev starts `relay dev`, every role in one process with an embedded
// nats-server (Process.NATS), for figures of the single-machine mode.
//
// Every process gets its own log file (stderr, plus stdout lines prefixed
// "stdout: ") under the harness directory, and is started with a parent
// death signal, so that no process outlives the program that started it,
// even when that program panics or is killed. Close stops everything.
// Every wait is bounded.
package procs
