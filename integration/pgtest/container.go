package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"

	"github.com/docket-dev/docket/internal/pgserver"
)

// docker is how pgserver.Find starts a container when a Docker engine is
// reachable, after it tried local binaries; DOCKET_TEST_POSTGRES=container
// makes it the only way.
var docker = pgserver.Starter{Name: "container", Hint: "start a Docker engine", Start: startDocker}

// startDocker starts a container on a Docker engine that answers a ping and
// opens it; closing the server removes the container. It returns an error
// wrapping pgserver.ErrUnavailable when no engine answers.
func startDocker(ctx context.Context) (*pgserver.Server, error) {
	if err := dockerReachable(ctx); err != nil {
		return nil, fmt.Errorf("%w: %w", pgserver.ErrUnavailable, err)
	}
	image := containerImage()
	c, err := startContainer(ctx, image)
	if err != nil {
		return nil, err
	}
	return pgserver.Open(ctx, c.url, "container "+image, c.stop)
}

// ImageEnv names the environment variable holding the image of the
// PostgreSQL container, in place of [DefaultImage]: postgres:16 on a CI
// with a registry, or an image built here without one (scripts/pg-image
// makes docket-postgres:<Debian release>). The image must take
// POSTGRES_PASSWORD, POSTGRES_USER and POSTGRES_DB as the official
// image's entrypoint does.
const ImageEnv = "DOCKET_TEST_POSTGRES_IMAGE"

// DefaultImage is the PostgreSQL container's image when [ImageEnv] is unset.
const DefaultImage = "postgres:15-alpine"

// containerImage is the image of the container to start: $DOCKET_TEST_POSTGRES_IMAGE,
// else DefaultImage.
func containerImage() string {
	if image := os.Getenv(ImageEnv); image != "" {
		return image
	}
	return DefaultImage
}

// The labels of every container pgtest starts, beside testcontainers' own:
// the machine and process it was started for, so that a later start can
// remove what a test process that died left running. Docker's own reaper
// (Ryuk) does the same where it can run; where no registry can be reached
// its image cannot be pulled, and TESTCONTAINERS_RYUK_DISABLED=true turns
// it off.
const (
	labelHost = "dev.docket.pgtest.host"
	labelPID  = "dev.docket.pgtest.pid"
)

// containerLabels are the labels of a container this process starts.
func containerLabels() map[string]string {
	host, _ := os.Hostname()
	return map[string]string{labelHost: host, labelPID: strconv.Itoa(os.Getpid())}
}

// removeStaleContainers removes the containers pgtest started on this
// machine for processes that are no longer running. Errors are ignored:
// this is only tidying up.
func removeStaleContainers(ctx context.Context) {
	host, err := os.Hostname()
	if err != nil {
		return
	}
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return
	}
	defer cli.Close()
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{
		All:     true,
		Filters: make(client.Filters).Add("label", labelHost+"="+host),
	})
	if err != nil {
		return
	}
	for _, c := range list.Items {
		if pid, err := strconv.Atoi(c.Labels[labelPID]); err == nil && !pgserver.ProcessAlive(pid) {
			_, _ = cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		}
	}
}

// dockerProbeTimeout bounds the check for a Docker engine, so that machines
// with only the docker CLI fall through to local binaries quickly.
const dockerProbeTimeout = 3 * time.Second

// errNoDocker says that no Docker endpoint is configured at all.
var errNoDocker = errors.New("no Docker engine: DOCKER_HOST is unset and no docker.sock exists")

// dockerSockets lists where a local Docker engine's socket usually is.
func dockerSockets() []string {
	socks := []string{"/var/run/docker.sock"}
	if dir := os.Getenv("XDG_RUNTIME_DIR"); dir != "" {
		socks = append(socks, filepath.Join(dir, "docker.sock")) // rootless Docker
	}
	if home, err := os.UserHomeDir(); err == nil {
		socks = append(socks, filepath.Join(home, ".docker", "run", "docker.sock")) // Docker Desktop
	}
	return socks
}

// dockerReachable returns nil if a Docker engine answers a ping within
// dockerProbeTimeout. It returns errNoDocker at once when DOCKER_HOST is
// unset and no socket file exists, and never panics.
func dockerReachable(ctx context.Context) error {
	configured := os.Getenv("DOCKER_HOST") != ""
	for _, s := range dockerSockets() {
		if _, err := os.Stat(s); err == nil {
			configured = true
		}
	}
	if !configured {
		return errNoDocker
	}

	ctx, cancel := context.WithTimeout(ctx, dockerProbeTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Errorf("docker probe panicked: %v", r)
			}
		}()
		cli, err := testcontainers.NewDockerClientWithOpts(ctx)
		if err != nil {
			done <- err
			return
		}
		defer cli.Close()
		_, err = cli.Ping(ctx, client.PingOptions{})
		done <- err
	}()
	// The probe should honour ctx; the select makes sure we wait no longer
	// even if some layer does not.
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("docker engine did not answer within %v", dockerProbeTimeout)
	}
}

// containerPostgres is a PostgreSQL container started by this package.
type containerPostgres struct {
	url string // admin URL of the postgres database
	ctr *tcpostgres.PostgresContainer
}

// startContainer starts image with durability turned off and its data on
// tmpfs, and waits until it accepts connections. It returns an error (never
// panics) if the container cannot be started; a half-started container is
// removed. If this process dies without calling stop, the container is
// removed by testcontainers' reaper (Ryuk) where it runs, and otherwise by
// the next start on this machine.
func startContainer(ctx context.Context, image string) (c *containerPostgres, err error) {
	var ctr *tcpostgres.PostgresContainer
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("testcontainers panicked: %v", r)
		}
		if err != nil && ctr != nil {
			_ = testcontainers.TerminateContainer(ctr)
		}
	}()

	removeStaleContainers(ctx)
	// The port is published on the host, so do not use a guessable password.
	password := pgserver.RandomName("pw")
	ctr, err = tcpostgres.Run(ctx, image,
		tcpostgres.WithUsername("postgres"),
		tcpostgres.WithPassword(password),
		tcpostgres.WithDatabase("postgres"),
		testcontainers.WithCmd("postgres",
			"-c", "fsync=off",
			"-c", "synchronous_commit=off",
			"-c", "full_page_writes=off",
			"-c", "max_connections="+strconv.Itoa(pgserver.DefaultMaxConnections)),
		testcontainers.WithTmpfs(map[string]string{"/var/lib/postgresql/data": "rw"}),
		testcontainers.WithLabels(containerLabels()),
		// A fast shutdown when the container is stopped, whatever the
		// image says.
		testcontainers.WithConfigModifier(func(cfg *container.Config) { cfg.StopSignal = "SIGINT" }),
		tcpostgres.BasicWaitStrategies(),
	)
	if err != nil {
		return nil, containerError(err)
	}
	u, err := ctr.ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		return nil, fmt.Errorf("container address: %w", err)
	}
	return &containerPostgres{url: u, ctr: ctr}, nil
}

// stop removes the container. It returns the error of removing it, if any.
func (c *containerPostgres) stop(ctx context.Context) error {
	return testcontainers.TerminateContainer(c.ctr, testcontainers.StopContext(ctx))
}

// containerError adds to err, testcontainers' error starting a container,
// what usually mends it when no registry can be reached.
func containerError(err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "ryuk") || strings.Contains(msg, "reaper"):
		return fmt.Errorf("%w (testcontainers' reaper needs its image from a registry: set TESTCONTAINERS_RYUK_DISABLED=true where there is none)", err)
	case strings.Contains(msg, "pull"):
		return fmt.Errorf("%w (no registry? build an image with scripts/pg-image and set %s to it)", err, ImageEnv)
	case strings.Contains(msg, "external check"):
		return fmt.Errorf("%w (testcontainers looked for the container's port on the Docker network's gateway, as it does "+
			"inside a container: where the engine runs beside the tests, set TESTCONTAINERS_HOST_OVERRIDE=127.0.0.1)", err)
	}
	return err
}
