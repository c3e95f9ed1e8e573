package docketotel_test

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/docketotel"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/worker"
)

// Receipt is the payload of the example's kind.
type Receipt struct {
	Order int `json:"order"`
}

var sendReceipt = jobs.MustKind[Receipt]("shop.receipt", 1)

// A worker's metrics and the census of unfinished jobs on a Prometheus
// endpoint: an OpenTelemetry MeterProvider whose reader is the Prometheus
// exporter, given to the worker and to a Census, and the registry served
// at /metrics. Three receipts are sent; a fourth job waits in a queue
// nobody serves.
func Example_prometheus() {
	ctx := context.Background()
	pool := testkit.ExamplePool(ctx, db.SystemClock{}, "user:ana", []string{"shop"},
		testkit.Grants("svc:shop", "shop", access.JobCreate, access.JobClaim)...)
	defer pool.Close()

	registry := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(registry), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		log.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer func() { _ = mp.Shutdown(ctx) }()

	reg := worker.NewRegistry()
	sent := make(chan int, 3)
	if err := worker.Handle(reg, sendReceipt, func(ctx context.Context, job *jobs.Typed[Receipt]) error {
		sent <- job.Args.Order
		return nil
	}, worker.HandlerOptions{}); err != nil {
		log.Fatal(err)
	}
	w, err := worker.NewClient(pool, worker.Config{Project: "shop", Actor: "svc:shop", Registry: reg,
		MeterProvider: mp, Logger: testkit.Logger})
	if err != nil {
		log.Fatal(err)
	}
	census, err := docketotel.NewCensus(pool, docketotel.CensusConfig{Actor: "svc:shop", MeterProvider: mp})
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = census.Close() }()

	for order := 1; order <= 3; order++ {
		spec, _ := sendReceipt.Spec(Receipt{Order: order})
		if _, err := w.Enqueue(ctx, spec); err != nil {
			log.Fatal(err)
		}
	}
	spec, _ := sendReceipt.Spec(Receipt{Order: 4})
	spec.Queue = "later"
	if _, err := w.Enqueue(ctx, spec); err != nil {
		log.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		log.Fatal(err)
	}
	for range 3 {
		<-sent
	}
	stop, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := w.Stop(stop); err != nil { // a stopped worker has recorded every outcome
		log.Fatal(err)
	}

	srv := httptest.NewServer(promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		for _, name := range []string{"docket_job_started_total{", "docket_job_succeeded_total{", "docket_job_duration_seconds_count{", "docket_jobs{"} {
			if strings.HasPrefix(lines.Text(), name) {
				fmt.Println(lines.Text())
			}
		}
	}
	// Output:
	// docket_job_duration_seconds_count{docket_job_kind="shop.receipt",docket_job_outcome="succeeded",docket_project="shop",docket_queue="default"} 3
	// docket_job_started_total{docket_job_kind="shop.receipt",docket_project="shop",docket_queue="default"} 3
	// docket_job_succeeded_total{docket_job_kind="shop.receipt",docket_project="shop",docket_queue="default"} 3
	// docket_jobs{docket_job_state="queued",docket_project="shop",docket_queue="later"} 1
}
