// Command relay runs the durable LLM token relay. One binary, one
// subcommand per role:
//
//	relay dev            everything in one process: embedded NATS, edge,
//	                     worker, coordinator and the fake upstream
//	relay edge           the OpenAI-compatible HTTP/WebSocket front door
//	relay worker         streams requests from the providers into JetStream
//	relay coordinator    cluster-wide provider state
//	relay mock-upstream  the fake OpenAI-compatible provider
//	relay status         the cluster's breakers, health, quotas and canaries,
//	                     fetched from an edge (--edge URL); --watch redraws
//	                     it in place until Ctrl-C
//	relay keys check     check the providers' API keys (--provider NAME):
//	                     one line per key, fails if one is not verified
//	relay probe URL      GET URL, succeed on a 2xx answer: the container
//	                     probe of an ops listener on loopback
//	relay version        print the version
//
// Every role takes --config FILE (YAML; repeated, later files override
// earlier ones) and --set key=value (repeatable);
// RELAY_ environment variables override the file, --set overrides both.
// SIGINT and SIGTERM stop a role gracefully: a worker takes no more
// requests, lets its streams finish within worker.drain_timeout and hands
// the rest to other workers, which continue them at once; a second signal
// ends the process at once. SIGHUP makes a worker, a coordinator (and dev)
// re-read its providers' api_keys_file.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/relaydev/relay/relay/app"
	"github.com/relaydev/relay/relay/config"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = ""

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "relay:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		usage(stderr)
		return errors.New("missing subcommand")
	}
	sub, args := args[0], args[1:]
	role := config.Role(sub)
	switch role {
	case config.RoleDev, config.RoleEdge, config.RoleWorker, config.RoleCoordinator, config.RoleMockUpstream, config.RoleSetup:
	default:
		switch sub {
		case "version", "--version":
			fmt.Fprintln(stdout, "relay", buildVersion())
			return nil
		case "help", "-h", "--help":
			usage(stdout)
			return nil
		case "status":
			return runStatus(args, stdout, stderr)
		case "keys":
			return runKeys(args, stdout, stderr) // keys.go
		case "nats":
			return runNATS(args, stdout, stderr) // nats.go
		case "probe":
			return runProbe(args, stdout) // probe.go
		}
		usage(stderr)
		return fmt.Errorf("unknown subcommand %q", sub)
	}

	fs := flag.NewFlagSet("relay "+sub, flag.ContinueOnError)
	var files multiFlag
	fs.Var(&files, "config", "YAML configuration `file`; repeated, later files override earlier ones (a list whole)")
	var sets multiFlag
	fs.Var(&sets, "set", "override one setting, `key=value` (repeatable), e.g. --set edge.listen=127.0.0.1:9090")
	if helped, err := parseFlags(fs, args, stdout, stderr); helped || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	src := config.Sources{Environ: os.Environ(), Set: sets}
	if len(files) > 0 {
		src.File, src.Overlays = files[0], files[1:]
	}
	if role == config.RoleDev && src.File == "" {
		src.File = defaultDevConfig()
	}
	cfg, err := config.Load(src, role)
	if err != nil {
		return err
	}
	if cfg.Tracing.Endpoint == "" {
		// The collector's address as every OpenTelemetry SDK reads it.
		cfg.Tracing.Endpoint = os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
		if err := cfg.Tracing.Validate("OTEL_EXPORTER_OTLP_ENDPOINT: tracing"); err != nil {
			return err
		}
	}
	logger := slog.New(cfg.Log.Handler(stderr))
	if names := cfg.IgnoredEnv(); len(names) > 0 {
		// Names only: a value may be a secret.
		logger.Warn("ignoring RELAY_ environment variables that are not configuration keys (RELAY_SECTION__KEY sets section.key)", "names", names)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// The first signal starts the graceful shutdown; restoring the
		// default lets a second one end the process at once.
		<-ctx.Done()
		stop()
	}()
	return app.Run(ctx, role, cfg, logger, func(a app.Addrs) {
		announce(stdout, role, a)
	})
}

// defaultDevConfig is configs/dev.yaml when run from the repository root,
// so `relay dev` there needs no flags; elsewhere the built-in defaults.
func defaultDevConfig() string {
	const path = "configs/dev.yaml"
	if _, err := os.Stat(path); err == nil {
		return path
	}
	return ""
}

// announce prints the one ready line.
func announce(w io.Writer, role config.Role, a app.Addrs) {
	switch role {
	case config.RoleDev:
		upstream := ""
		if a.MockUpstream != "" {
			upstream = ", fake upstream http://" + a.MockUpstream
		}
		fmt.Fprintf(w, "relay dev ready: edge http://%s (nats %s%s) — try: curl -N http://%s/v1/chat/completions -H 'Content-Type: application/json' -d '{\"model\":%q,\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}]}'\n",
			a.Edge, a.NATS, upstream, a.Edge, a.Model)
	case config.RoleEdge:
		fmt.Fprintf(w, "relay edge ready: http://%s\n", a.Edge)
	case config.RoleMockUpstream:
		fmt.Fprintf(w, "relay mock-upstream ready: http://%s/v1\n", a.MockUpstream)
	case config.RoleCoordinator:
		fmt.Fprintf(w, "relay coordinator ready: http://%s/readyz\n", a.Coordinator)
	case config.RoleSetup:
		fmt.Fprintln(w, "relay setup done: the streams, the worker consumer and the buckets are set up")
	default:
		fmt.Fprintf(w, "relay %s ready\n", role)
	}
}

func buildVersion() string {
	if version != "" {
		return version
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" {
		return info.Main.Version
	}
	return "(devel)"
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: relay <subcommand> [--config file.yaml ...] [--set key=value ...]

subcommands:
  dev            everything in one process (embedded NATS, edge, worker,
                 coordinator, fake upstream)
  edge           OpenAI-compatible HTTP/SSE/WebSocket front door
  worker         stream requests from providers into JetStream
  coordinator    cluster-wide provider health and state
  setup          create or update the JetStream streams, consumer and
                 buckets with the setup identity (setup_nats), then exit
  mock-upstream  the fake OpenAI-compatible provider (fault injection)
  status         print the cluster's breakers, health, quotas and canaries,
                 read from an edge (--edge http://host:port); --watch
                 redraws it in place until Ctrl-C
  keys check     check the providers' API keys from the configuration
                 (--provider NAME); fails if one is not verified
  nats users     write the NATS users of the relay's account, an nkey per
                 node (--edges, --workers, --coordinators) or a password
                 per role (--passwords), into --out DIR
  probe URL      GET URL and succeed on a 2xx answer (container probes
                 of an ops listener bound to loopback)
  version        print the version
`)
}

// parseFlags parses args into fs. -h and --help print the usage on stdout
// and succeed (helped: there is nothing else to do); a bad flag prints it
// on stderr and fails. A custom fs.Usage writes to fs.Output().
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (helped bool, err error) {
	var out bytes.Buffer
	fs.SetOutput(&out)
	err = fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		_, err = out.WriteTo(stdout)
		return true, err
	}
	if err != nil {
		out.WriteTo(stderr)
	}
	return false, err
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }
