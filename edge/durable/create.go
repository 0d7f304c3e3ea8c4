package durable

import (
	"math"
	"net/http"
	"strings"
	"time"

	store "github.com/relaydev/relay/relay/durable"
	"github.com/relaydev/relay/relay/wire"
)

// defaultContentType is a stream's when its PUT names none.
const defaultContentType = "application/octet-stream"

// create answers PUT: it creates the stream (201) or confirms the one
// there with the same configuration (200).
func (h *Handler) create(w http.ResponseWriter, r *http.Request, acc Access, path string) {
	ctx := r.Context()
	k, e := h.key(ctx)
	if e != nil {
		h.fail(w, e)
		return
	}
	spec, e := h.spec(r, k)
	if e != nil {
		h.fail(w, e)
		return
	}
	body, ok := h.readBody(w, r)
	if !ok {
		return
	}
	data, n := body, 0
	if store.IsJSON(spec.ContentType) || spec.ContentType == "" && spec.Fork != nil && h.sourceIsJSON(r, acc, spec.Fork.Source) {
		if data, n, e = messages(body, true); e != nil {
			h.fail(w, e)
			return
		}
	}
	st, t, created, err := h.deps.Store.Create(ctx, acc.Tenant, path, spec, data, n)
	if err != nil {
		h.fail(w, storeError(err))
		return
	}
	hdr := w.Header()
	h.describe(hdr, st)
	hdr.Set(HeaderResumeToken, h.deps.IssueToken(st.ID, st.Tenant))
	hdr.Set("Content-Type", st.ContentType)
	hdr.Set(hNextOffset, k.Offset(t.Offset))
	if t.Closed {
		hdr.Set(hClosed, "true")
	}
	if !created {
		w.WriteHeader(http.StatusOK)
		return
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	hdr.Set("Location", scheme+"://"+r.Host+r.URL.EscapedPath())
	w.WriteHeader(http.StatusCreated)
}

// sourceIsJSON reports whether a fork's source is a JSON stream, which
// the fork's body then must be too.
func (h *Handler) sourceIsJSON(r *http.Request, acc Access, source string) bool {
	src, err := h.deps.Store.Open(r.Context(), acc.Tenant, source)
	return err == nil && store.IsJSON(src.ContentType)
}

// spec reads a PUT's configuration from its headers.
func (h *Handler) spec(r *http.Request, k *wire.CursorKey) (store.Spec, *wire.Error) {
	hdr := r.Header
	spec := store.Spec{ContentType: strings.TrimSpace(hdr.Get("Content-Type")), Closed: isTrue(hdr.Get(hClosed))}
	ttl, hasTTL := hdr[http.CanonicalHeaderKey(hTTL)]
	exp, hasExp := hdr[http.CanonicalHeaderKey(hExpiresAt)]
	if hasTTL && hasExp {
		return spec, badRequest(hTTL, "give Stream-TTL or Stream-Expires-At, not both")
	}
	if hasTTL {
		n, ok := parseDecimal(strings.TrimSpace(ttl[0]), math.MaxInt32)
		if !ok {
			return spec, badRequest(hTTL, "Stream-TTL must be a whole number of seconds")
		}
		v := int64(n)
		spec.TTL = &v
	}
	if hasExp {
		at, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(exp[0]))
		if err != nil {
			return spec, badRequest(hExpiresAt, "Stream-Expires-At must be an RFC 3339 time")
		}
		spec.ExpiresAt = &at
	}
	from := strings.TrimSpace(hdr.Get(hForkedFrom))
	offset, hasOffset := hdr[http.CanonicalHeaderKey(hForkOffset)]
	sub, hasSub := hdr[http.CanonicalHeaderKey(hForkSubOffset)]
	if from == "" {
		if hasOffset || hasSub {
			return spec, badRequest(hForkedFrom, "Stream-Fork-Offset and Stream-Fork-Sub-Offset need Stream-Forked-From")
		}
		if spec.ContentType == "" {
			spec.ContentType = defaultContentType
		}
		return spec, nil
	}
	fork := &store.ForkSpec{Source: h.streamPath(from)}
	if hasOffset {
		if o := strings.TrimSpace(offset[0]); o != "now" {
			at, err := parseOffset(k, o)
			if err != nil {
				return spec, badRequest(hForkOffset, "Stream-Fork-Offset is not an offset of this relay")
			}
			fork.Offset = &at
		}
	}
	if hasSub {
		n, ok := parseDecimal(strings.TrimSpace(sub[0]), math.MaxInt64)
		if !ok {
			return spec, badRequest(hForkSubOffset, "Stream-Fork-Sub-Offset must be a non-negative integer")
		}
		if n > 0 && !hasOffset {
			return spec, badRequest(hForkSubOffset, "Stream-Fork-Sub-Offset needs Stream-Fork-Offset")
		}
		fork.SubOffset = int64(n)
	}
	spec.Fork = fork
	return spec, nil
}

// streamPath is a Stream-Forked-From path as the streams are keyed: below
// the prefix, whether the client gave it with the prefix or without.
func (h *Handler) streamPath(p string) string {
	if rest, ok := strings.CutPrefix(p, h.cfg.Prefix+"/"); ok {
		return "/" + rest
	}
	if !strings.HasPrefix(p, "/") {
		return "/" + p
	}
	return p
}

// isTrue is the protocol's reading of Stream-Closed: "true" in any case,
// anything else absent.
func isTrue(v string) bool { return strings.EqualFold(strings.TrimSpace(v), "true") }
