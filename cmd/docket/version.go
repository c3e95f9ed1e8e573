package main

import (
	"fmt"
	"runtime/debug"

	"github.com/docket-dev/docket/db"
)

func (c *cli) version(args []string) error {
	fs := c.flags("version")
	format := outputFlag(fs)
	if _, err := c.parse(fs, args); err != nil {
		return err
	}
	build := "(devel)"
	river := "unknown"
	if info, ok := debug.ReadBuildInfo(); ok {
		if info.Main.Version != "" {
			build = info.Main.Version
		}
		for _, dep := range info.Deps {
			if dep.Path == "github.com/riverqueue/river" {
				river = dep.Version
			}
		}
	}
	if *format == formatJSON {
		return writeSafeJSON(c.stdout, versionDoc{Docket: build, SchemaVersion: db.LatestVersion(),
			SchemaFingerprint: db.SchemaFingerprint(), River: river, RiverSchemaVersion: db.RiverLatestVersion()})
	}
	fmt.Fprintf(c.stdout, "docket %s\n", build)
	fmt.Fprintf(c.stdout, "docket schema version %d (fingerprint %s)\n", db.LatestVersion(), db.SchemaFingerprint())
	fmt.Fprintf(c.stdout, "River %s, schema version %d\n", river, db.RiverLatestVersion())
	return nil
}
