// Package slots is the pure part of the edges' fair sharing of the
// workers' slots between tenants (edge/admit_tenant_gate.go): the fleet's load
// as the workers' heartbeats tell it (Load), whether a tenant may start
// one more generation now (Admit), and a tenant's share split between the
// edges its requests wait at (Split). It has no clock and no lock. The
// workers share their slots for forwarded requests by the same Admit.
//
// The workers' slots are the queue's only scarce resource: a generation
// holds one for as long as its answer streams, often minutes. The work
// queue is first in, first out, so a tenant that queued a backlog would
// hold every slot as each frees, and another tenant's request would wait
// behind the whole backlog. The edges therefore keep a tenant's backlog
// out of the queue: a request starts when its tenant holds less than its
// share of the slots, and the fleet keeps a reserve of slots that only a
// tenant running nothing may take, so a newcomer's first token never
// waits for another tenant's generation to end.
package slots
