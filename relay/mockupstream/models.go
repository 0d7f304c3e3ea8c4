package mockupstream

import "net/http"

// modelsCreated is the fixed "created" time of the listed models.
const modelsCreated = 1700000000

// handleModels lists the models. A request with an anthropic-version
// header is an Anthropic client's, whose key may come as x-api-key; a key
// not accepted is answered 401 in that dialect's shape. The relay checks
// its keys with this call (Stats.ModelsByKey).
func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	s.stats.modelsRequest(r)
	authorized := s.authorized
	if r.Header.Get("anthropic-version") != "" {
		authorized = s.authorizedAnthropic
	}
	if !authorized(w, r) {
		return
	}
	list := modelList{Object: "list", Data: make([]model, 0, len(s.cfg.Models))}
	for _, id := range s.cfg.Models {
		list.Data = append(list.Data, model{ID: id, Object: "model", Created: modelsCreated, OwnedBy: "relay-mock"})
	}
	writeJSON(w, http.StatusOK, list)
}
