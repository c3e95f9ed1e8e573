package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/projects"
)

var statusBySubcommand = map[string]projects.Status{
	"archive":  projects.Archived,
	"activate": projects.Active,
	"retire":   projects.Retired,
}

func (c *cli) project(args []string) (dbAction, error) {
	sub, rest, err := c.sub("project", args)
	if err != nil {
		return nil, err
	}
	fs := c.flags("project " + sub)
	if sub == "list" {
		format := outputFlag(fs)
		if _, err := c.parse(fs, rest); err != nil {
			return nil, err
		}
		return func(ctx context.Context, pool *pgxpool.Pool) error { return c.projectList(ctx, pool, *format) }, nil
	}
	status, isMove := statusBySubcommand[sub]
	pos, err := c.parse(fs, rest, "NAME")
	if err != nil {
		return nil, err
	}
	name := pos[0]
	return func(ctx context.Context, pool *pgxpool.Pool) error {
		var p projects.Project
		pc, err := c.projectClient(pool)
		if err != nil {
			return err
		}
		if isMove {
			p, err = pc.SetStatus(ctx, name, status)
		} else {
			p, err = pc.Create(ctx, name)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "project %s is %s\n", p.Name, p.Status)
		return nil
	}, nil
}

func (c *cli) projectList(ctx context.Context, pool *pgxpool.Pool, format string) error {
	pc, err := c.projectClient(pool)
	if err != nil {
		return err
	}
	var all []projects.Project
	after := ""
	for {
		page, err := pc.List(ctx, projects.Filter{After: after, Limit: db.MaxPage})
		if err != nil {
			return err
		}
		all = append(all, page...)
		if len(page) < db.MaxPage {
			break
		}
		after = page[len(page)-1].Name
	}
	if format == formatJSON {
		return writeSafeJSON(c.stdout, projectListDoc{Projects: mapSlice(all, projectOf)})
	}
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "PROJECT\tSTATUS\tCREATED BY\tCREATED AT")
	for _, p := range all {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", p.Name, p.Status, p.CreatedBy, p.CreatedAt.Format(time.RFC3339))
	}
	return w.Flush()
}

func (c *cli) grant(cmd string, args []string) (dbAction, error) {
	fs := c.flags(cmd)
	pos, err := c.parse(fs, args, "PRINCIPAL", "PROJECT", "CAPABILITY")
	if err != nil {
		return nil, err
	}
	g := access.Grant{Principal: access.Actor(pos[0]), Project: pos[1], Capability: access.Capability(pos[2])}
	if cmd == "revoke" {
		return func(ctx context.Context, pool *pgxpool.Pool) error {
			ac, err := c.accessClient(pool)
			if err != nil {
				return err
			}
			removed, err := ac.Revoke(ctx, g)
			if err != nil {
				return err
			}
			if removed {
				fmt.Fprintf(c.stdout, "revoked %s on %s from %s\n", g.Capability, g.Project, g.Principal)
			} else {
				fmt.Fprintf(c.stdout, "%s did not hold %s on %s\n", g.Principal, g.Capability, g.Project)
			}
			return nil
		}, nil
	}
	return func(ctx context.Context, pool *pgxpool.Pool) error {
		ac, err := c.accessClient(pool)
		if err != nil {
			return err
		}
		added, err := ac.Allow(ctx, g)
		if err != nil {
			return err
		}
		if added {
			fmt.Fprintf(c.stdout, "granted %s on %s to %s\n", g.Capability, g.Project, g.Principal)
		} else {
			fmt.Fprintf(c.stdout, "%s already holds %s on %s\n", g.Principal, g.Capability, g.Project)
		}
		return nil
	}, nil
}

func (c *cli) grants(args []string) (dbAction, error) {
	fs := c.flags("grant list")
	format := outputFlag(fs)
	pos, err := c.parse(fs, args, "PROJECT")
	if err != nil {
		return nil, err
	}
	project := pos[0]
	return func(ctx context.Context, pool *pgxpool.Pool) error {
		ac, err := c.accessClient(pool)
		if err != nil {
			return err
		}
		list, err := ac.List(ctx, project)
		if err != nil {
			return err
		}
		if *format == formatJSON {
			return writeSafeJSON(c.stdout, grantsDoc{Project: project, Grants: mapSlice(list, grantOf)})
		}
		w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "PRINCIPAL\tCAPABILITY\tGRANTED BY\tGRANTED AT")
		for _, r := range list {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", r.Principal, r.Capability, r.GrantedBy, r.GrantedAt.Format(time.RFC3339))
		}
		return w.Flush()
	}, nil
}

// projectClient returns a projects client acting as the command's actor.
func (c *cli) projectClient(pool *pgxpool.Pool) (*projects.Client, error) {
	return projects.NewClient(pool, projects.Config{Actor: c.actor, Clock: c.clock})
}

// accessClient returns a grants client acting as the command's actor.
func (c *cli) accessClient(pool *pgxpool.Pool) (*access.Client, error) {
	return access.NewClient(pool, access.Config{Actor: c.actor, Clock: c.clock})
}
