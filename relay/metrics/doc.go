// Package metrics defines every Prometheus metric family the relay
// exports, with their names, help texts and labels, in one place. Roles
// construct their families against a prometheus.Registerer they are
// handed (never the global registry) and record events through typed
// methods, so a label value always comes from a typed enum or from the
// configuration: never from a stream id, a model name a client or a
// provider typed, or any other unbounded text.
//
// # Families
//
// relay/README.md's "Metrics" section is the operator's table. In short:
//
//	edge    relay_edge_requests_total{route,outcome}          HTTP requests by route pattern and outcome
//	        relay_edge_active_streams                          streams this edge follows (one live subscription each)
//	        relay_edge_active_clients{transport}               clients connected, by sse | ws | completion
//	        relay_edge_ttft_seconds                            request accepted → first chunk written to the client
//	        relay_edge_relay_added_ttft_seconds                the part of that the relay adds: edge TTFT − upstream TTFT
//	        relay_edge_inter_chunk_seconds                     gap between two writes of chunks to one client
//	        relay_edge_chunks_delivered_total{transport}       chunks written to clients
//	        relay_edge_resumes_total{outcome}                  requests that carried a cursor, by outcome
//	        relay_edge_resumed_chunks_total                    chunks delivered to sessions that resumed
//	        relay_edge_resumed_tokens_total                    completion tokens those chunks carried (estimate)
//	        relay_sequence_gaps_total                          live frames that did not follow the last one
//	        relay_edge_catch_ups_total{reason}                 re-reads of the log for other reasons
//	        relay_edge_live_dropped_total                      live frames dropped on a full client queue
//	worker  relay_streams_total{status}                        streams ended, by terminal status
//	        relay_worker_jobs_total{outcome}                   jobs finished, by outcome (also fenced, handed over…)
//	        relay_worker_ttft_seconds{provider,model}          request taken → first token from the provider
//	        relay_upstream_ttft_seconds{provider,model}        upstream call started → its first token
//	        relay_chunks_published_total{provider,model}       chunk frames stored
//	        relay_upstream_attempts_total{provider,model,seam} upstream calls: first | retry | continuation | fallback | takeover
//	        relay_worker_fenced_total                          jobs whose write was fenced by a newer owner
//	        relay_worker_append_batch_frames                   frames per atomic batch of appends (replicated chunk stream)
//	        relay_worker_offers_total{result}                  requests offered before they were queued: taken | declined
//	        relay_quota_wait_seconds{provider}                 waits at the gate (shared Retry-After, quotas)
//	        relay_gate_refusals_total{provider}                calls the gate refused (breaker open)
//	        relay_api_key_checks_total{provider,result}        checks of API keys before they take traffic
//	        relay_api_keys{provider,state}                     API keys by the state of their check
//	        relay_tokens_total{provider,model,tenant,direction} tokens in (prompt) and out (completion)
//	        relay_cost_usd_total{provider,model,tenant}        cost, priced by the model's configured price
//	breaker relay_breaker_state{provider,model,state}          1 for the breaker's current state, 0 for the others
//	        relay_breaker_transitions_total{provider,model,from,to} state changes
//	        relay_breaker_next_probe_timestamp_seconds{provider,model} when an open breaker lets its half-open probe through
//
// Provider and model label values are the configured names (see Names);
// anything else is counted as "other". Tenants are the configured tenant
// names, "default" for requests without one, "other" for the rest.
//
// Several roles may share one registry (`relay dev` runs them all in one
// process): a family that is already registered is reused.
package metrics
