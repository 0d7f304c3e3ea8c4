// Package statusview is the screen of `relay status`: it reads an edge's
// GET /v1/relay/status (Source) and draws it as tables (Print), once or
// redrawn in place until a signal (Watch), a provider's colour saying
// whether it serves (verdict.go).
package statusview

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/term"

	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/fleet/breaker"
	"github.com/relaydev/relay/relay/wire"
)

// Source reads the status from one edge.
type Source struct {
	// Edge is the edge's base URL; Key, if set, its API key.
	Edge, Key string
	// Timeout bounds each read.
	Timeout time.Duration
}

// Read fetches the status once, within the source's timeout; it returns
// the body as the edge sent it too.
func (s Source) Read(ctx context.Context) (fleet.Status, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.Edge+"/v1/relay/status", nil)
	if err != nil {
		return fleet.Status{}, nil, err
	}
	if s.Key != "" {
		req.Header.Set("Authorization", "Bearer "+s.Key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fleet.Status{}, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fleet.Status{}, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return fleet.Status{}, nil, fmt.Errorf("GET /v1/relay/status: %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	var st fleet.Status
	if err := json.Unmarshal(body, &st); err != nil {
		return fleet.Status{}, nil, fmt.Errorf("GET /v1/relay/status: %w", err)
	}
	return st, body, nil
}

// IsTerminal reports whether w is a terminal: colours and screen control
// codes are for people, not for pipes and files.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// ANSI colours.
const (
	green  = "\x1b[32m"
	yellow = "\x1b[33m"
	red    = "\x1b[31m"
	bold   = "\x1b[1m"
	// plain is the default colour, as long as the others: see tw in
	// Print.
	plain = "\x1b[39m"
	reset = "\x1b[0m"
)

// colored is s in colour c (no colour: plain), if on.
func colored(on bool, c, s string) string {
	if !on {
		return s
	}
	if c == "" {
		c = plain
	}
	return c + s + reset
}

// Print renders st as tables.
func Print(w io.Writer, st fleet.Status, color bool, now time.Time) {
	paint := func(c, s string) string { return colored(color, c, s) }
	section := func(title string) { fmt.Fprintln(w, paint(bold, title)) }
	// tabwriter counts the escape codes as text: every cell of a coloured
	// column, its header included, is painted (plain if need be), so that
	// each carries as many of them and the columns stay straight.
	tw := func() *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

	holder := st.Coordinator.Holder
	if holder == "" {
		holder = paint(yellow, "none (workers still trip and recover breakers)")
	}
	fmt.Fprintf(w, "%s %s\n\n", paint(bold, "coordinator:"), holder)

	section("PROVIDERS")
	t := tw()
	fmt.Fprintf(t, "PROVIDER\t%s\tWHY\tLATENCY\tCHECKED\tLAST ERROR\n", paint("", "STATE"))
	for _, p := range providerVerdicts(st, now) {
		latency, checked, lastErr := "-", "-", "-"
		if h := p.Health; h != nil {
			latency, checked, lastErr = fmt.Sprintf("%dms", h.LatencyMS), ago(now, time.Unix(h.CheckedAt, 0)), dash(h.LastError)
		}
		fmt.Fprintf(t, "%s\t%s\t%s\t%s\t%s\t%s\n", p.Provider, paint(verdictColor(p.State), p.State), dash(strings.Join(p.Why, ", ")),
			latency, checked, lastErr)
	}
	t.Flush()

	fmt.Fprintln(w)
	section("BREAKERS")
	t = tw()
	fmt.Fprintf(t, "SCOPE\t%s\tTRIPS\tSINCE\tUNTIL\tPROBE\tREASON\n", paint("", "PHASE"))
	for _, b := range st.Breakers {
		until := "-"
		switch {
		case b.Phase == breaker.Open && !b.Until.IsZero():
			until = "in " + b.Until.Sub(now).Round(time.Second).String()
		case b.Phase == breaker.HalfOpen && b.ProbeBy != "":
			until = "probe by " + b.ProbeBy
		}
		probe := "-"
		if b.ProbeBy != "" {
			probe = b.ProbeBy
		}
		fmt.Fprintf(t, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", scopeName(b.Provider, b.Model), paint(phaseColor(b.Phase), string(b.Phase)), b.Trips,
			ago(now, b.Since), until, probe, dash(b.Reason))
	}
	t.Flush()

	if len(st.Pauses) > 0 {
		fmt.Fprintln(w)
		section("PAUSES (shared Retry-After)")
		t = tw()
		fmt.Fprintf(t, "SCOPE\t%s\tASKED\tBY\n", paint("", "UNTIL"))
		for _, p := range st.Pauses {
			fmt.Fprintf(t, "%s\t%s\t%v\t%s\n", scopeName(p.Provider, p.Model), paint(yellow, "in "+p.Until.Sub(now).Round(100*time.Millisecond).String()),
				time.Duration(p.RetryAfterMS)*time.Millisecond, p.By)
		}
		t.Flush()
	}

	fmt.Fprintln(w)
	section("QUOTAS (per minute, over the fleet)")
	t = tw()
	fmt.Fprintf(t, "LIMIT\tVALUE\t%s\tDEMAND\tNODES\n", paint("", "USED"))
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
			fmt.Fprintf(t, "%s\t%d\t%d\t%d\n", r.Scope, r.Requests, r.Retries.Retries, r.Denied)
		}
		t.Flush()
	}

	if len(st.Keys) > 0 {
		fmt.Fprintln(w)
		section("API KEYS (as the workers checked them)")
		t = tw()
		fmt.Fprintf(t, "PROVIDER\tKEY\tFINGERPRINT\t%s\tWORKERS\tCHECKED\tREASON\n", paint("", "STATE"))
		for _, k := range st.Keys {
			fmt.Fprintf(t, "%s\t#%d\t%s\t%s\t%d\t%s\t%s\n", k.Provider, k.Index, k.Fingerprint, paint(keyColor(k.State), k.State), k.Workers,
				ago(now, k.CheckedAt), dash(k.Reason))
		}
		t.Flush()
	}

	if len(st.Canaries) > 0 {
		fmt.Fprintln(w)
		section("CANARIES")
		t = tw()
		fmt.Fprintf(t, "MODEL\tPROVIDER\t%s\tWEIGHT\tSTEP CALLS\tSTEP ERRORS\tREASON\n", paint("", "PHASE"))
		for _, c := range st.Canaries {
			sc := c.StepCounts()
			col := green
			switch c.Phase {
			case "aborted":
				col = red
			case "ramping":
				col = yellow
			}
			fmt.Fprintf(t, "%s\t%s\t%s\t%v%%\t%d\t%d\t%s\n", c.Model, c.Provider, paint(col, string(c.Phase)), c.Weight, sc.Calls, sc.Errors, dash(c.Reason))
		}
		t.Flush()
	}
	if len(st.Quotas.Nodes) > 0 {
		fmt.Fprintln(w)
		section("NODES (reporting to the shared quotas)")
		t = tw()
		fmt.Fprintln(t, "ROLE\tNODE\tREPORTED")
		for _, n := range st.Quotas.Nodes {
			fmt.Fprintf(t, "%s\t%s\t%s\n", n.Role, n.Node, ago(now, n.At))
		}
		t.Flush()
	}
	if len(st.Log) > 0 {
		fmt.Fprintln(w)
		section("LOG (the chunk streams, one per partition: the answers', then the Durable Streams')")
		t = tw()
		fmt.Fprintln(t, "STREAM\tLEADER\tREPLICAS\tFRAMES\tSTORED")
		for _, p := range st.Log {
			stored := mib(p.Bytes)
			if p.MaxBytes > 0 {
				stored += " of " + mib(uint64(p.MaxBytes))
			}
			fmt.Fprintf(t, "%s\t%s\t%d\t%d\t%s\n", p.Stream, dash(p.Leader), p.Replicas, p.Messages, stored)
		}
		t.Flush()
	}
	if len(st.Errors) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, paint(red, "not read: "+strings.Join(st.Errors, "; ")))
	}
}

// mib renders n bytes in MiB.
func mib(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// verdictColor is the colour of a provider's state.
func verdictColor(state string) string {
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
