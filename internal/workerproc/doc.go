// Package workerproc runs docket workers in child processes for the suites
// that crash, stop and watch real ones (integration/faults,
// integration/soak): the test binary is run again, told by an environment
// variable to be a worker process, and the two sides speak in lines. It is
// for docket's own tests only.
//
// # The worker process
//
// A suite's TestMain finds its variable set and runs the process's side
// instead of the tests. [Begin] comes first, before the worker is built:
// from then on SIGTERM asks the process to stop, and the end of its
// standard input says the test that started it is gone. [Process.Serve]
// starts the worker, says [LineReady], and waits: on SIGTERM it stops the
// worker and says [LineStopped] with how long Stop took and its error; when
// the test is gone it returns at once. [Process.Say] prints the suite's own
// lines (a handler's start, a count), one whole line at a time, and
// [Logger] is the worker's logger: warnings and errors, as slog's text
// lines on standard error, which the test reads.
//
//	p := workerproc.Begin()
//	w, err := worker.NewClient(pool, worker.Config{…, Logger: workerproc.Logger()})
//	…
//	return p.Serve(ctx, w, stopTimeout, 0, nil)
//
// # The test's side
//
// [Start] runs the binary again with the suite's variable set to its spec,
// as JSON, waits until the process says it is ready (failing the test when
// it exits first, or is not ready within a minute), and kills it when the
// test ends. Every other line the process prints goes to the suite's
// [Lines] callbacks, from the goroutines that read them; the [Child] keeps
// the end of its standard error, for a failure to show, and counts the
// data races the race detector reported there. [Child.Kill] and
// [Child.Terminate] end it, the second as an operator would, with SIGTERM
// and a bound. [StartCommand] does the same through a command that runs
// the binary elsewhere and passes on its environment variable, standard
// streams and signals: docker run -i, for a worker in a container.
package workerproc
