package edge

import (
	"context"
	"encoding/json"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/protocol"
)

// natsTimeout bounds one NATS round trip (a KV call, a publish, one direct
// get) when the caller's context has no tighter deadline.
const natsTimeout = 5 * time.Second

// submit accepts a validated request as the new stream id (fresh from
// protocol.NewStreamID): it stores the stream's Meta, then queues the
// Request for the workers, and returns the stream's id and Meta.
//
// The Meta is written first so that a client resuming the id the moment it
// learns it finds the stream. If queueing fails after that, the id was never
// shown to anyone: the orphan Meta only expires. The request is published
// with Nats-Msg-Id = id, so JetStream queues a retried publish once.
func (s *Server) submit(ctx context.Context, id, tenant string, req chatRequest) (string, protocol.Meta, *protocol.Error) {
	if e := s.admitGeneration(ctx, tenant, req.Model); e != nil { // tenant_limit.go
		return "", protocol.Meta{}, e
	}
	ctx, cancel := context.WithTimeout(ctx, natsTimeout)
	defer cancel()
	meta := protocol.Meta{Tenant: tenant, Model: req.Model, Created: time.Now().Unix()}
	if err := s.meta.create(ctx, id, meta); err != nil {
		return "", protocol.Meta{}, unavailable("storing stream metadata", err)
	}
	data, err := json.Marshal(protocol.Request{
		StreamID: id,
		Tenant:   tenant,
		Model:    req.Model,
		Body:     req.Body,
		Created:  meta.Created,
	})
	if err != nil {
		// Body is JSON the edge parsed, so marshalling cannot fail.
		panic("edge: encode request: " + err.Error())
	}
	msg := &nats.Msg{Subject: protocol.RequestSubject, Data: data}
	if _, err := s.js.PublishMsg(ctx, msg, jetstream.WithMsgID(id)); err != nil {
		return "", protocol.Meta{}, unavailable("queueing the request", err)
	}
	return id, meta, nil
}
