package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/docket-dev/docket/access"
)

// actorCmd binds login roles to the principals they may act as, unbinds
// them, and lists the bindings.
func (c *cli) actorCmd(args []string) (dbAction, error) {
	sub, rest, err := c.sub("actor", args)
	if err != nil {
		return nil, err
	}
	fs := c.flags("actor " + sub)
	switch sub {
	case "bind", "unbind":
		pos, err := c.parse(fs, rest, "ROLE", "PRINCIPAL")
		if err != nil {
			return nil, err
		}
		role, principal := pos[0], access.Actor(pos[1])
		return func(ctx context.Context, pool *pgxpool.Pool) error {
			ac, err := c.accessClient(pool)
			if err != nil {
				return err
			}
			if sub == "unbind" {
				removed, err := ac.Unbind(ctx, role, principal)
				if err != nil {
					return err
				}
				if removed {
					fmt.Fprintf(c.stdout, "%s no longer acts as %s\n", role, principal)
				} else {
					fmt.Fprintf(c.stdout, "%s was not bound to %s\n", role, principal)
				}
				return nil
			}
			added, err := ac.Bind(ctx, role, principal)
			if err != nil {
				return err
			}
			if added {
				fmt.Fprintf(c.stdout, "%s may act as %s\n", role, principal)
			} else {
				fmt.Fprintf(c.stdout, "%s was already bound to %s\n", role, principal)
			}
			return nil
		}, nil
	case "list":
		format := outputFlag(fs)
		pos, err := c.parse(fs, rest, "[ROLE]")
		if err != nil {
			return nil, err
		}
		role := pos[0]
		return func(ctx context.Context, pool *pgxpool.Pool) error {
			ac, err := c.accessClient(pool)
			if err != nil {
				return err
			}
			list, err := ac.Bindings(ctx, role)
			if err != nil {
				return err
			}
			if *format == formatJSON {
				return writeSafeJSON(c.stdout, bindingsDoc{Bindings: mapSlice(list, bindingOf)})
			}
			w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ROLE\tPRINCIPAL\tBOUND BY\tBOUND AT")
			for _, b := range list {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", b.Role, b.Principal, b.BoundBy, b.BoundAt.Format(time.RFC3339))
			}
			return w.Flush()
		}, nil
	}
	return nil, usageOf(fs, "no such subcommand")
}
