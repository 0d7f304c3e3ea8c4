package edge

import "net/http"

type modelList struct {
	Object string        `json:"object"`
	Data   []modelObject `json:"data"`
}

type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// handleModels lists the Catalog's models the caller's key may use, so SDKs
// and UIs that list models first work unchanged.
func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	p := principalOf(r)
	list := modelList{Object: "list", Data: []modelObject{}}
	for _, m := range s.catalog.Models() {
		if !p.allows(m) {
			continue
		}
		list.Data = append(list.Data, modelObject{ID: m, Object: "model", OwnedBy: "relay"})
	}
	writeJSON(w, http.StatusOK, list)
}

// handleModel serves GET /v1/models/{id}, which SDKs call to check a model
// (openai-node's models.retrieve): the model object, or, for a model the
// relay does not serve or the key may not use, the same 404
// model_not_found a request for it gets. Ids may hold slashes
// ("org/model"), hence the wildcard.
func (s *Server) handleModel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !s.catalog.Serves(id) || !principalOf(r).allows(id) {
		writeError(w, modelNotFound(id))
		return
	}
	writeJSON(w, http.StatusOK, modelObject{ID: id, Object: "model", OwnedBy: "relay"})
}
