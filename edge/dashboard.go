package edge

import (
	"context"
	"embed"
	"io/fs"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/wire"
)

// The dashboard (GET /dashboard) and the demo chat (GET / with edge.demo)
// are plain HTML, CSS and JavaScript embedded in the binary: no CDN, no
// build step, charts drawn by hand as SVG. The dashboard polls
// GET /v1/relay/dashboard.json every two seconds.
//
//go:embed web
var webFS embed.FS

// web is the embedded directory's content.
var web = func() fs.FS {
	sub, err := fs.Sub(webFS, "web")
	if err != nil {
		panic("edge: embedded web assets: " + err.Error())
	}
	return sub
}()

// opsRoutes registers /metrics, the dashboard with its JSON, the static
// assets, and with edge.demo the demo chat and its helpers (demo.go).
func (s *Server) opsRoutes(mux *http.ServeMux) {
	metrics := promhttp.HandlerFor(s.obs.gatherer, promhttp.HandlerOpts{})
	mux.Handle("/metrics", methods{http.MethodGet: s.operatorOnly(metrics.ServeHTTP)}) // operator.go
	mux.Handle("/dashboard", methods{http.MethodGet: servePage("dashboard.html")})
	mux.Handle("/static/{file}", methods{http.MethodGet: serveStatic})
	mux.Handle("/v1/relay/dashboard.json", methods{http.MethodGet: s.operatorOnly(s.handleDashboard)})
	if s.cfg.Demo {
		s.demoRoutes(mux)
	}
}

// servePage serves an embedded HTML page.
func servePage(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b, err := fs.ReadFile(web, name)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Cache-Control", "no-cache")
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'")
		h.Set("X-Content-Type-Options", "nosniff")
		w.Write(b)
	}
}

// serveStatic serves the pages' scripts and style sheets.
func serveStatic(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	var ctype string
	switch {
	case strings.HasSuffix(name, ".js"):
		ctype = "text/javascript; charset=utf-8"
	case strings.HasSuffix(name, ".css"):
		ctype = "text/css; charset=utf-8"
	case strings.HasSuffix(name, ".svg"):
		ctype = "image/svg+xml"
	}
	b, err := fs.ReadFile(web, name)
	if ctype == "" || err != nil {
		writeError(w, &wire.Error{Message: "unknown asset " + name, Type: wire.TypeInvalidRequest, Code: CodeUnknownURL, Status: http.StatusNotFound})
		return
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Write(b)
}

// dashboard is the body of GET /v1/relay/dashboard.json.
type dashboard struct {
	NowMS     int64          `json:"now_ms"`
	Providers []providerView `json:"providers"`
	// Breakers come from the breaker families of this process's metrics
	// registry; empty where no breaker reports to it.
	Breakers []breakerView `json:"breakers"`
	// ActiveStreams are the streams this edge follows; Clients the
	// connections by transport.
	ActiveStreams int            `json:"active_streams"`
	Clients       map[string]int `json:"clients"`
	Workers       []workerView   `json:"workers"`
	WorkersError  string         `json:"workers_error,omitempty"`
	Recent        recentSeries   `json:"recent"`
	CostByModel   []modelCost    `json:"cost_by_model"`
	HealthError   string         `json:"health_error,omitempty"`
}

// providerView is one provider on the health board.
type providerView struct {
	Provider string `json:"provider"`
	// State is green, yellow, red, or unknown when the coordinator has not
	// probed it (yet).
	State     string `json:"state"`
	LatencyMS int64  `json:"latency_ms"`
	LastError string `json:"last_error,omitempty"`
	// CheckedAgoMS is the age of the probe.
	CheckedAgoMS int64 `json:"checked_ago_ms,omitempty"`
}

// breakerView is one breaker: a provider's (model "all") or one model's
// on a provider.
type breakerView struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
	State    string `json:"state"`
	// ProbeInMS is the time until an open breaker lets its half-open probe
	// through; absent when it is not open.
	ProbeInMS *int64 `json:"probe_in_ms,omitempty"`
}

// dashboardTimeout bounds the KV reads of one dashboard poll.
const dashboardTimeout = 2 * time.Second

func (s *Server) handleDashboard(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), dashboardTimeout)
	defer cancel()
	now := time.Now()
	d := dashboard{
		NowMS:         now.UnixMilli(),
		ActiveStreams: s.hub.Streams(),
		Clients: map[string]int{
			"sse":        s.clients.count(clientSSE),
			"ws":         s.clients.count(clientWS),
			"completion": s.clients.count(clientUnary),
		},
		Breakers: s.obs.breakers(now),
	}
	var err error
	if d.Providers, err = readHealth(ctx, s.obs.health, s.js, s.catalog.Providers(), now); err != nil {
		d.HealthError = err.Error()
	}
	if d.Workers, err = s.obs.workers.list(); err != nil {
		d.WorkersError = err.Error()
	}
	d.Recent, d.CostByModel = s.obs.recent.snapshot()
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, d)
}

// readHealth reads the health the coordinator published for each
// provider; "unknown" for a provider it has not probed yet.
func readHealth(ctx context.Context, board *fleet.HealthBoard, js jetstream.JetStream, providers []provider.Config, now time.Time) ([]providerView, error) {
	out := make([]providerView, 0, len(providers))
	for _, p := range providers {
		out = append(out, providerView{Provider: p.Name, State: "unknown"})
	}
	var firstErr error
	for i := range out {
		hl, ok, err := board.Read(ctx, js, out[i].Provider)
		if err != nil {
			firstErr = cmpErr(firstErr, err)
			continue
		}
		if !ok {
			continue
		}
		out[i].State, out[i].LatencyMS, out[i].LastError = hl.State, hl.LatencyMS, hl.LastError
		if hl.CheckedAt > 0 {
			out[i].CheckedAgoMS = max(now.Sub(time.Unix(hl.CheckedAt, 0)).Milliseconds(), 0)
		}
	}
	return out, firstErr
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// breakers reads the breaker families from the registry /metrics serves.
func (o *observer) breakers(now time.Time) []breakerView {
	if o.gatherer == nil {
		return nil
	}
	mfs, err := o.gatherer.Gather()
	if err != nil {
		return nil
	}
	byKey := map[[2]string]*breakerView{}
	view := func(m *dto.Metric) *breakerView {
		k := [2]string{label(m.GetLabel(), "provider"), label(m.GetLabel(), "model")}
		if byKey[k] == nil {
			byKey[k] = &breakerView{Provider: k[0], Model: k[1]}
		}
		return byKey[k]
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "relay_breaker_state":
			for _, m := range mf.GetMetric() {
				if m.GetGauge().GetValue() == 1 {
					view(m).State = label(m.GetLabel(), "state")
				}
			}
		case "relay_breaker_next_probe_timestamp_seconds":
			for _, m := range mf.GetMetric() {
				if at := m.GetGauge().GetValue(); at > 0 {
					in := max(int64(at*1e3)-now.UnixMilli(), 0)
					view(m).ProbeInMS = &in
				}
			}
		}
	}
	out := make([]breakerView, 0, len(byKey))
	for _, b := range byKey {
		if b.State != "open" {
			b.ProbeInMS = nil
		}
		out = append(out, *b)
	}
	slices.SortFunc(out, func(a, b breakerView) int {
		return strings.Compare(a.Provider+"/"+a.Model, b.Provider+"/"+b.Model)
	})
	return out
}

func label(pairs []*dto.LabelPair, name string) string {
	for _, l := range pairs {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
