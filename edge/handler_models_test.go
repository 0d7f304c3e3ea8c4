package edge

import (
	"net/http"
	"testing"
)

// TestRetrieveModel: GET /v1/models/{id} is the model object for a model
// the caller may use, and a 404 model_not_found for any other, as for a
// request naming it.
func TestRetrieveModel(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(tenantConfig())
	res := do(t, "GET", edge.url+"/v1/models/"+testModel, "", bearerHeader(keyAcme))
	var m modelObject
	if err := jsonDecode(res, &m); err != nil || res.StatusCode != http.StatusOK || m.ID != testModel || m.Object != "model" || m.OwnedBy != "relay" {
		t.Fatalf("%d %+v %v", res.StatusCode, m, err)
	}
	for _, tc := range []struct{ name, model, key string }{
		{"unknown", "gpt-nope", keyAcme},
		{"not the key's", testModel, keyBeta},
		{"with a slash", "org/" + testModel, keyAcme},
	} {
		res := do(t, "GET", edge.url+"/v1/models/"+tc.model, "", bearerHeader(tc.key))
		if got := decodeError(t, res); res.StatusCode != http.StatusNotFound || got.Code != CodeModelNotFound || got.Param != "model" {
			t.Errorf("%s: %d %+v", tc.name, res.StatusCode, got)
		}
	}
}
