package main

import (
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/relaydev/relay/relay/natsperm"
)

// runNATS is `relay nats users`: it writes the NATS users of the relay's
// account (package natsperm) into --out, either one nkey per node, with
// each node's seed file, or (--passwords) one password user per role, the
// form of configs/nats/accounts.conf.
func runNATS(args []string, stdout, stderr io.Writer) error {
	const usage = "usage: relay nats users --out DIR [--edges a,b] [--workers a,b] [--coordinators a] [--home-domain D] | --passwords"
	switch {
	case len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help"):
		fmt.Fprintln(stdout, usage)
		return nil
	case len(args) == 0 || args[0] != "users":
		fmt.Fprintln(stderr, usage)
		return errors.New("nats: missing subcommand users")
	}
	fs := flag.NewFlagSet("relay nats users", flag.ContinueOnError)
	out := fs.String("out", "", "`directory` for accounts.conf and the seed files (created, mode 0700)")
	edges := fs.String("edges", "", "comma-separated `names` of the edge nodes (their nats.node)")
	workers := fs.String("workers", "", "comma-separated `names` of the worker nodes")
	coordinators := fs.String("coordinators", "", "comma-separated `names` of the coordinator nodes")
	home := fs.String("home-domain", "", "the home region's JetStream `domain`, for the servers of a region that is not the home")
	passwords := fs.Bool("passwords", false, "one password user per role instead of an nkey per node")
	if helped, err := parseFlags(fs, args[1:], stdout, stderr); helped || err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case *out == "":
		return errors.New("nats users: --out is required")
	case *passwords && (*edges != "" || *workers != "" || *coordinators != ""):
		return errors.New("nats users: --passwords names no nodes")
	}
	if err := os.MkdirAll(*out, 0o700); err != nil {
		return err
	}
	o := natsperm.Options{HomeDomain: *home}
	path := filepath.Join(*out, natsperm.AccountsFile)
	if *passwords {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		err = natsperm.RenderPasswords(f, o)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			fmt.Fprintf(stdout, "wrote %s\n", path)
		}
		return err
	}
	nodes := natsperm.Nodes{
		natsperm.Edge:        names(*edges),
		natsperm.Worker:      names(*workers),
		natsperm.Coordinator: names(*coordinators),
	}
	if _, err := natsperm.Generate(*out, nodes, o, rand.Reader); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s and a seed file per node (%s for the setup step)\n", path, natsperm.SeedFile(natsperm.Setup, ""))
	return nil
}

// names splits a comma-separated list, dropping empty entries.
func names(list string) []string {
	var out []string
	for _, n := range strings.Split(list, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}
