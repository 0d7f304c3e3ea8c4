package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/fleet/breaker"
	"github.com/relaydev/relay/relay/wire"
)

// runStatus is `relay status`: it fetches GET /v1/relay/status from an edge
// and prints it as tables, coloured unless --no-color (or NO_COLOR is set,
// or --json asks for the JSON as it came).
func runStatus(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("relay status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	edgeURL := fs.String("edge", "http://127.0.0.1:8080", "base `URL` of an edge")
	key := fs.String("key", "", "API `key` sent as a bearer token, if the edge requires one")
	noColor := fs.Bool("no-color", os.Getenv("NO_COLOR") != "", "plain output")
	asJSON := fs.Bool("json", false, "print the JSON as the edge sent it")
	timeout := fs.Duration("timeout", 10*time.Second, "bound of the request")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(*edgeURL, "/")+"/v1/relay/status", nil)
	if err != nil {
		return err
	}
	if *key != "" {
		req.Header.Set("Authorization", "Bearer "+*key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /v1/relay/status: %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	if *asJSON {
		_, err := stdout.Write(body)
		return err
	}
	var st fleet.Status
	if err := json.Unmarshal(body, &st); err != nil {
		return fmt.Errorf("GET /v1/relay/status: %w", err)
	}
	printStatus(stdout, st, !*noColor, time.Now())
	return nil
}

// ANSI colours.
const (
	green  = "\x1b[32m"
	yellow = "\x1b[33m"
	red    = "\x1b[31m"
	bold   = "\x1b[1m"
	reset  = "\x1b[0m"
)

// printStatus renders st as tables.
func printStatus(w io.Writer, st fleet.Status, color bool, now time.Time) {
	paint := func(c, s string) string {
		if !color || c == "" {
			return s
		}
		return c + s + reset
	}
	section := func(title string) { fmt.Fprintln(w, paint(bold, title)) }
	// tabwriter counts the escape codes as text; padding before the
	// colour keeps the columns straight.
	tw := func() *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }
	pad := func(s string, n int) string { return s + strings.Repeat(" ", max(0, n-len(s))) }

	holder := st.Coordinator.Holder
	if holder == "" {
		holder = paint(yellow, "none (workers still trip and recover breakers)")
	}
	fmt.Fprintf(w, "%s %s\n\n", paint(bold, "coordinator:"), holder)

	section("HEALTH")
	t := tw()
	fmt.Fprintln(t, "PROVIDER\tSTATE \tBREAKER\tLATENCY\tCHECKED\tLAST ERROR")
	for _, h := range st.Health {
		fmt.Fprintf(t, "%s\t%s\t%s\t%dms\t%s\t%s\n", h.Provider, paint(healthColor(h.State), pad(h.State, 6)), dash(h.Breaker), h.LatencyMS,
			ago(now, time.Unix(h.CheckedAt, 0)), dash(h.LastError))
	}
	t.Flush()

	fmt.Fprintln(w)
	section("BREAKERS")
	t = tw()
	fmt.Fprintln(t, "SCOPE\tPHASE    \tTRIPS\tSINCE\tUNTIL\tPROBE\tREASON")
	for _, b := range st.Breakers {
		until := "-"
		switch {
		case b.Phase == breaker.Open:
			until = "in " + b.Until.Sub(now).Round(time.Second).String()
		case b.Phase == breaker.HalfOpen && b.ProbeBy != "":
			until = "probe by " + b.ProbeBy
		}
		probe := "-"
		if b.ProbeBy != "" {
			probe = b.ProbeBy
		}
		fmt.Fprintf(t, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", scopeName(b.Provider, b.Model), paint(phaseColor(b.Phase), pad(string(b.Phase), 9)), b.Trips,
			ago(now, b.Since), until, probe, dash(b.Reason))
	}
	t.Flush()

	if len(st.Pauses) > 0 {
		fmt.Fprintln(w)
		section("PAUSES (shared Retry-After)")
		t = tw()
		fmt.Fprintln(t, "SCOPE\tUNTIL\tASKED\tBY")
		for _, p := range st.Pauses {
			fmt.Fprintf(t, "%s\t%s\t%v\t%s\n", scopeName(p.Provider, p.Model), paint(yellow, "in "+p.Until.Sub(now).Round(100*time.Millisecond).String()),
				time.Duration(p.RetryAfterMS)*time.Millisecond, p.By)
		}
		t.Flush()
	}

	fmt.Fprintln(w)
	section("QUOTAS (per minute, over the fleet)")
	t = tw()
	fmt.Fprintln(t, "LIMIT\tVALUE\tUSED\tDEMAND\tNODES")
	for _, l := range st.Quotas.Limits {
		c := ""
		if l.PerMinute > 0 && l.Demand > l.PerMinute {
			c = yellow
		}
		fmt.Fprintf(t, "%s\t%.0f\t%s\t%.0f\t%d\n", l.Key, l.PerMinute, paint(c, fmt.Sprintf("%.0f", l.Used)), l.Demand, l.Nodes)
	}
	t.Flush()
	if len(st.Quotas.Retries) > 0 {
		t = tw()
		fmt.Fprintln(t, "RETRY BUDGET\tREQUESTS\tRETRIES\tDENIED")
		for _, r := range st.Quotas.Retries {
			fmt.Fprintf(t, "%s\t%d\t%d\t%d\n", r.Provider, r.Requests, r.Retries.Retries, r.Denied)
		}
		t.Flush()
	}

	if len(st.Keys) > 0 {
		fmt.Fprintln(w)
		section("API KEYS (as the workers checked them)")
		t = tw()
		fmt.Fprintln(t, "PROVIDER\tKEY\tFINGERPRINT\tSTATE    \tWORKERS\tCHECKED\tREASON")
		for _, k := range st.Keys {
			fmt.Fprintf(t, "%s\t#%d\t%s\t%s\t%d\t%s\t%s\n", k.Provider, k.Index, k.Fingerprint, paint(keyColor(k.State), pad(k.State, 9)), k.Workers,
				ago(now, k.CheckedAt), dash(k.Reason))
		}
		t.Flush()
	}

	if len(st.Canaries) > 0 {
		fmt.Fprintln(w)
		section("CANARIES")
		t = tw()
		fmt.Fprintln(t, "MODEL\tPROVIDER\tPHASE   \tWEIGHT\tSTEP CALLS\tSTEP ERRORS\tREASON")
		for _, c := range st.Canaries {
			sc := c.StepCounts()
			col := green
			switch c.Phase {
			case "aborted":
				col = red
			case "ramping":
				col = yellow
			}
			fmt.Fprintf(t, "%s\t%s\t%s\t%v%%\t%d\t%d\t%s\n", c.Model, c.Provider, paint(col, pad(string(c.Phase), 8)), c.Weight, sc.Calls, sc.Errors, dash(c.Reason))
		}
		t.Flush()
	}
	if len(st.Errors) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, paint(red, "not read: "+strings.Join(st.Errors, "; ")))
	}
}

func healthColor(state string) string {
	switch state {
	case wire.HealthGreen:
		return green
	case wire.HealthYellow:
		return yellow
	}
	return red
}

// keyColor paints a refused key red and one not verified yellow.
func keyColor(state string) string {
	switch state {
	case "failed":
		return red
	case "verified":
		return green
	}
	return yellow
}

func phaseColor(p breaker.Phase) string {
	switch p {
	case breaker.Open:
		return red
	case breaker.HalfOpen:
		return yellow
	}
	return green
}

func scopeName(provider, model string) string {
	if model == "" {
		return provider
	}
	return provider + "/" + model
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func ago(now, t time.Time) string {
	if t.IsZero() || t.Unix() == 0 {
		return "-"
	}
	return now.Sub(t).Round(time.Second).String() + " ago"
}
