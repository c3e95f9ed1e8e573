// Package docketotel is what docket offers OpenTelemetry beyond the spans
// and metrics its clients record themselves: a census of the unfinished
// jobs, read from the database, as gauges.
//
// docket's clients take their providers in their configuration:
//
//	w, err := worker.NewClient(pool, worker.Config{
//		Actor: "svc:billing", Registry: reg,
//		TracerProvider: tp, // enqueue and run spans, linked
//		MeterProvider:  mp, // attempts, outcomes, waits, run times, sweeps
//	})
//
// Left nil, a provider costs nothing: no span, no measurement, no statement,
// no allocation. Set, each enqueue runs in a producer span whose context is
// stored with the jobs it creates (docket.job_traces, in the same
// transaction), and each attempt runs in a consumer span linked to it,
// whichever process enqueued the job and however long ago.
//
// The jobs waiting, running and in doubt are a fact of the database, not of
// any one process: a [Census] reads them, one grouped count on the partial
// indexes the claim and the sweeps keep, whenever its meter is collected
// (a Prometheus scrape, say). Run one per deployment, not one per worker.
//
// docs/telemetry.md lists every metric, span and attribute, how to wire a
// Prometheus endpoint (see the example), and what each costs.
package docketotel
