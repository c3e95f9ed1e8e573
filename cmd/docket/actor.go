package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/docket-dev/docket/access"
)

const actorUsage = "actor needs a subcommand: bind ROLE PRINCIPAL, unbind ROLE PRINCIPAL, list [ROLE]"

// actorCmd binds login roles to the principals they may act as, unbinds
// them, and lists the bindings.
func (c *cli) actorCmd(args []string) (dbAction, error) {
	if len(args) == 0 {
		return nil, usagef(actorUsage)
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "bind", "unbind":
		if len(rest) != 2 {
			return nil, usagef("actor %s needs ROLE PRINCIPAL", sub)
		}
		role, principal := rest[0], access.Actor(rest[1])
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
		if len(rest) > 1 {
			return nil, usagef("actor list takes at most one ROLE")
		}
		role := ""
		if len(rest) == 1 {
			role = rest[0]
		}
		return func(ctx context.Context, pool *pgxpool.Pool) error {
			ac, err := c.accessClient(pool)
			if err != nil {
				return err
			}
			list, err := ac.Bindings(ctx, role)
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ROLE\tPRINCIPAL\tBOUND BY\tBOUND AT")
			for _, b := range list {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", b.Role, b.Principal, b.BoundBy, b.BoundAt.Format(time.RFC3339))
			}
			return w.Flush()
		}, nil
	}
	return nil, usagef("unknown actor subcommand %q; %s", sub, actorUsage)
}
