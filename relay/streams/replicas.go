package streams

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/wire"
)

// # Replicas
//
// A relay pointed at a three-server cluster with the settings it ships with
// must survive the loss of a server: that is what the cluster is for. With
// one replica, every stream and bucket lives on one server, and when that
// server goes, so do the queue, the answers and the breakers, on all the
// others. So streams.replicas is "auto" unless set:
//
//   - The assets exist already: their replicas (the request stream's). Auto
//     never rescales what an operator or an earlier version made, and a
//     role without the rights to change assets agrees with them.
//   - The server the role is connected to names no cluster: 1. That is a
//     single server, such as relay dev's embedded one.
//   - It names one: 3, and 1 if JetStream answers that it is not clustered.
//     A server joined to others only by leaf nodes or gateways is given a
//     cluster name too, but its JetStream stands alone; one that is
//     clustered has routes and a configured name (nats-server refuses to
//     start JetStream on a cluster otherwise).
//
// Every role resolves it the same way against the same servers, so they
// agree on every asset's settings.

// ClusterReplicas is the replicas of every stream and bucket on a cluster
// when streams.replicas is unset: a majority survives one server lost.
const ClusterReplicas = 3

// errNotConnected: the replicas cannot be chosen before the connection
// says what it reached; setting up is retried until it does.
var errNotConnected = errors.New("streams: not connected to NATS yet")

// On is t with its defaults, and with its replicas and partitions chosen
// for the servers js is connected to when t leaves them unset (see
// "Replicas" above, and "Partitions" in partitions.go).
func (t Topology) On(ctx context.Context, js jetstream.JetStream) (Topology, error) {
	t, err := t.replicasOn(ctx, js)
	if err != nil {
		return t, err
	}
	return t.partitionsOn(ctx, js)
}

func (t Topology) replicasOn(ctx context.Context, js jetstream.JetStream) (Topology, error) {
	t = t.WithDefaults()
	if t.Replicas > 0 {
		return t, nil
	}
	nc := js.Conn()
	if !nc.IsConnected() {
		return t, errNotConnected
	}
	t.autoReplicas = true
	s, err := js.Stream(ctx, wire.RequestStream)
	switch {
	case err == nil:
		t.Replicas = max(s.CachedInfo().Config.Replicas, 1)
	case !errors.Is(err, jetstream.ErrStreamNotFound):
		return t, fmt.Errorf("streams: stream %s: %w", wire.RequestStream, err)
	case nc.ConnectedClusterName() == "":
		t.Replicas = 1
	default:
		t.Replicas = ClusterReplicas
	}
	return t, nil
}

// JetStream's errors for replicas a server cannot place.
const (
	codeNoSuitablePeers       = 10005
	codeInsufficientResources = 10023
	codeNotClustered          = 10074
)

// place runs create with t's replicas. When On chose a cluster's replicas
// and JetStream answers that it is not clustered, it runs create again
// with one; when the cluster cannot place them (a cluster of two, or one
// with a server down when the assets are first made), the error says what
// to set.
func (t Topology) place(create func(Topology) error) error {
	err := create(t)
	if t.autoReplicas && t.Replicas > 1 && apiCode(err) == codeNotClustered {
		t.Replicas = 1
		if t.autoPartitions {
			t.Partitions = 1
		}
		err = create(t)
	}
	switch apiCode(err) {
	case codeNoSuitablePeers, codeInsufficientResources:
		if t.autoReplicas {
			return fmt.Errorf("%w (streams.replicas is unset, so %d on a cluster: set it to the replicas this cluster can hold)", err, t.Replicas)
		}
	}
	return err
}

// apiCode is the JetStream error code in err's chain, or zero.
func apiCode(err error) jetstream.ErrorCode {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode
	}
	return 0
}
