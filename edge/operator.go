package edge

import (
	"net/http"

	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/fleet/quota"
	"github.com/relaydev/relay/relay/wire"
)

// # Operators and tenants
//
// /metrics, the dashboard's data and /v1/relay/status describe the whole
// fleet: every tenant's names, tokens, cost and limits, and the nodes'
// host-pid names. They are served on the public listener, so with
// edge.api_keys set they ask for a key marked operator: /metrics and the
// dashboard's data answer 401 without one and 403 to a tenant's key, and
// /v1/relay/status shows a tenant the providers' state and its own limit
// only (tenantStatus). An edge without keys serves everyone as one
// anonymous tenant, and everyone as its operator.

// CodeOperatorOnly refuses a tenant's key on an operator's endpoint (403).
const CodeOperatorOnly = "operator_key_required"

// isOperator reports whether p may read the fleet's figures.
func (s *Server) isOperator(p principal) bool { return !s.auth.enabled() || p.operator }

// operatorOnly serves h to operators; paths under /v1/ were authenticated
// already, the others are here.
func (s *Server) operatorOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p := principalOf(r)
		if s.auth.enabled() && r.Context().Value(principalKey{}) == nil {
			key, found, e := credential(r)
			if e == nil && !found {
				e = unauthorized("an operator's API key is required (Authorization: Bearer <key>)")
			}
			if e == nil {
				var ok bool
				if p, ok = s.auth.key(key); !ok {
					e = unauthorized("Incorrect API key provided.")
				}
			}
			if e != nil {
				w.Header().Set("WWW-Authenticate", `Bearer realm="relay"`)
				writeError(w, e)
				return
			}
		}
		if !s.isOperator(p) {
			writeError(w, &wire.Error{
				Message: "only an operator's key (edge.api_keys[].operator) may read " + r.URL.Path,
				Type:    wire.TypeInvalidRequest,
				Code:    CodeOperatorOnly,
				Status:  http.StatusForbidden,
			})
			return
		}
		h(w, r)
	}
}

// tenantStatus is the part of st a tenant may see: the providers' state
// and its own limits (requests and tokens per minute, concurrent
// generations), without other tenants' limits and without the
// names of nodes (host and pid).
func tenantStatus(st fleet.Status, tenant string) fleet.Status {
	st.Coordinator = wire.Lease{}
	st.Keys = []fleet.KeyStatus{} // the relay's own provider keys
	for i := range st.Breakers {
		st.Breakers[i].ProbeBy = ""
	}
	q := &st.Quotas
	tok := wire.KeyToken(tenant)
	limits := q.Limits[:0:0]
	for _, l := range q.Limits {
		if !quota.IsTenant(l.Key) || l.Key == quota.TenantRPM(tok) || l.Key == quota.TenantTPM(tok) {
			l.Nodes = 0
			limits = append(limits, l)
		}
	}
	q.Limits = limits
	q.Nodes = nil
	if q.Tenants != nil {
		q.Tenants = &quota.Limits{
			TenantRPM:     q.Tenants.Tenant(tenant),
			TenantTPM:     q.Tenants.Tokens(tenant),
			MaxConcurrent: q.Tenants.ConcurrencyOf(tenant),
		}
	}
	return st
}
