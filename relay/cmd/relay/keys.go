package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"text/tabwriter"
	"time"

	"github.com/relaydev/relay/relay/apikeys"
	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/provider"
)

// runKeys is `relay keys check`: it checks every API key of the
// configured providers (or of one, --provider) with the call a worker
// checks a new key with, and prints one line per key, by fingerprint. It
// fails if a key is not verified, so a rotation script stops before it
// puts a bad key in place. verify_keys does not apply: the check was
// asked for.
func runKeys(args []string, stdout, stderr io.Writer) error {
	const usage = "usage: relay keys check [--config file.yaml ...] [--set key=value ...] [--provider NAME] [--timeout D]"
	switch {
	case len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help"):
		fmt.Fprintln(stdout, usage)
		return nil
	case len(args) == 0 || args[0] != "check":
		fmt.Fprintln(stderr, usage)
		return errors.New("keys: missing subcommand check")
	}
	fs := flag.NewFlagSet("relay keys check", flag.ContinueOnError)
	var files, sets multiFlag
	fs.Var(&files, "config", "YAML configuration `file` (a worker's); repeated, later files override earlier ones")
	fs.Var(&sets, "set", "override one setting, `key=value` (repeatable)")
	only := fs.String("provider", "", "check only the provider of this `name`")
	timeout := fs.Duration("timeout", apikeys.DefaultCheckTimeout, "bound of each key's check")
	if helped, err := parseFlags(fs, args[1:], stdout, stderr); helped || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	src := config.Sources{Environ: os.Environ(), Set: sets}
	if len(files) > 0 {
		src.File, src.Overlays = files[0], files[1:]
	}
	cfg, err := config.Load(src, config.RoleWorker)
	if err != nil {
		return err
	}
	var providers []provider.Config
	for _, p := range cfg.Providers {
		if *only == "" || p.Name == *only {
			providers = append(providers, p)
		}
	}
	if len(providers) == 0 {
		return fmt.Errorf("keys: no provider named %q", *only)
	}
	return checkKeys(context.Background(), stdout, &http.Client{}, providers, *timeout)
}

// checkKeys prints the check of every key of providers and fails if one
// is not verified.
func checkKeys(ctx context.Context, w io.Writer, hc *http.Client, providers []provider.Config, timeout time.Duration) error {
	t := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	defer t.Flush()
	bad, total := 0, 0
	for _, p := range providers {
		keys, err := apikeys.CheckAll(ctx, hc, p, timeout)
		if err != nil {
			fmt.Fprintf(t, "%s\t-\t-\tfailed: %v\n", p.Name, err)
			bad++
			continue
		}
		if len(keys) == 0 {
			fmt.Fprintf(t, "%s\t-\t-\tno keys: requests carry none\n", p.Name)
		}
		for _, k := range keys {
			total++
			verdict := "ok"
			switch k.State {
			case apikeys.Verified:
			case apikeys.Failed:
				verdict = "failed: " + k.Reason
			default:
				verdict = "failed: not verified: " + k.Reason
			}
			if verdict != "ok" {
				bad++
			}
			fmt.Fprintf(t, "%s\t#%d\t%s\t%s\n", p.Name, k.Index, k.Fingerprint, verdict)
		}
	}
	if bad > 0 {
		return fmt.Errorf("keys: %d of %d keys not verified", bad, total)
	}
	return nil
}
