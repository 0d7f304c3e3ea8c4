package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/relaydev/relay/relay/statusview"
)

// statusHelp heads `relay status --help`; the flags follow it.
const statusHelp = `usage: relay status [flags]

Prints the cluster's providers, breakers, pauses, quotas, canaries and
reporting nodes, read from an edge's GET /v1/relay/status. With --watch the
view is redrawn in place every --interval (not on a terminal: printed anew)
until Ctrl-C or SIGTERM, which leave the last view on the terminal; while
the edge cannot be read it says so in red, keeps the last view read and
keeps trying.

A provider's colour:
  green   its breakers are closed and its health (the coordinator's probe)
          is green
  yellow  a breaker half-open (probing), a shared Retry-After pause, health
          yellow (slow, or a call failed lately), or a canary ramping onto it
  red     a breaker open, or health red (not answering)
Colours are used only when stdout is a terminal, and never with --no-color
or NO_COLOR set.

flags:
`

// runStatus is `relay status`: it fetches GET /v1/relay/status from an edge
// and prints it as tables, once or, with --watch, redrawn until a signal.
func runStatus(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("relay status", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), statusHelp)
		fs.PrintDefaults()
	}
	edgeURL := fs.String("edge", "http://127.0.0.1:8080", "base `URL` of an edge")
	key := fs.String("key", "", "API `key` sent as a bearer token, if the edge requires one")
	noColor := fs.Bool("no-color", os.Getenv("NO_COLOR") != "", "plain output (default: colours on a terminal unless NO_COLOR is set)")
	asJSON := fs.Bool("json", false, "print the JSON as the edge sent it")
	timeout := fs.Duration("timeout", 10*time.Second, "bound of each request")
	watch := fs.Bool("watch", false, "redraw the view in place every --interval until Ctrl-C or SIGTERM")
	interval := fs.Duration("interval", 2*time.Second, "time between two reads with --watch")
	if helped, err := parseFlags(fs, args, stdout, stderr); helped || err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case *watch && *asJSON:
		return errors.New("--watch draws tables; it does not take --json")
	case *interval <= 0:
		return fmt.Errorf("--interval %v: must be positive", *interval)
	}
	src := statusview.Source{Edge: strings.TrimSuffix(*edgeURL, "/"), Key: *key, Timeout: *timeout}
	tty := statusview.IsTerminal(stdout)
	color := tty && !*noColor
	if *watch {
		return statusview.Watch(stdout, src, tty, color, *interval)
	}
	st, body, err := src.Read(context.Background())
	if err != nil {
		return err
	}
	if *asJSON {
		_, err := stdout.Write(body)
		return err
	}
	statusview.Print(stdout, st, color, time.Now())
	return nil
}
