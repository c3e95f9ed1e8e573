package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"

	"github.com/docket-dev/docket/internal/pgserver"
)

// docker is how pgserver.Find starts a container when a Docker engine is
// reachable, before it tries local binaries.
var docker = pgserver.Starter{Name: "docker", Hint: "start a Docker engine", Start: startDocker}

// startDocker starts a container on a Docker engine that answers a ping and
// opens it; closing the server removes the container. It returns an error
// wrapping pgserver.ErrUnavailable when no engine answers.
func startDocker(ctx context.Context) (*pgserver.Server, error) {
	if err := dockerReachable(ctx); err != nil {
		return nil, fmt.Errorf("%w: %w", pgserver.ErrUnavailable, err)
	}
	c, err := startContainer(ctx)
	if err != nil {
		return nil, err
	}
	return pgserver.Open(ctx, c.url, "container "+containerImage, c.stop)
}

// containerImage is the image started when a Docker engine is reachable.
const containerImage = "postgres:15-alpine"

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

// startContainer starts containerImage with durability turned off and its
// data on tmpfs, and waits until it accepts connections. It returns an error
// (never panics) if the container cannot be started; a half-started
// container is removed. The container is also removed by testcontainers'
// reaper (Ryuk) if this process dies without calling stop.
func startContainer(ctx context.Context) (c *containerPostgres, err error) {
	var ctr *tcpostgres.PostgresContainer
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("testcontainers panicked: %v", r)
		}
		if err != nil && ctr != nil {
			_ = testcontainers.TerminateContainer(ctr)
		}
	}()

	// The port is published on the host, so do not use a guessable password.
	password := pgserver.RandomName("pw")
	ctr, err = tcpostgres.Run(ctx, containerImage,
		tcpostgres.WithUsername("postgres"),
		tcpostgres.WithPassword(password),
		tcpostgres.WithDatabase("postgres"),
		testcontainers.WithCmd("postgres",
			"-c", "fsync=off",
			"-c", "synchronous_commit=off",
			"-c", "full_page_writes=off",
			"-c", "max_connections=200"),
		testcontainers.WithTmpfs(map[string]string{"/var/lib/postgresql/data": "rw"}),
		tcpostgres.BasicWaitStrategies(),
	)
	if err != nil {
		return nil, err
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
