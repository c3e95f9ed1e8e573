package main

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
)

// age is a duration as the tables print an age or a time left.
var age = regexp.MustCompile(`\b(\d+[smhd])+\b`)

// padding is a run of spaces between a table's columns.
var padding = regexp.MustCompile(` {2,}`)

// id is a read command's ID argument.
func id(n int64) string { return strconv.FormatInt(n, 10) }

// Each plural spelling of a command group runs the same command as its
// singular: the same output, the same messages, the same exit code.
func TestPluralsAreTheSingular(t *testing.T) {
	t.Parallel()
	w := setupWorld(t)
	for _, tc := range []struct {
		as               access.Actor
		plural, singular []string
	}{
		{ana, []string{"projects", "list"}, []string{"project", "list"}},
		{ana, []string{"grants", project}, []string{"grant", "list", project}},
		{ana, []string{"grants", "list", project}, []string{"grant", "list", project}},
		{ana, []string{"actors", "list"}, []string{"actor", "list"}},
		{ana, []string{"jobs", "list", project}, []string{"job", "list", project}},
		{ana, []string{"jobs", "show", id(w.job)}, []string{"job", "show", id(w.job)}},
		{ana, []string{"queues", "list", project}, []string{"queue", "list", project}},
		{ana, []string{"queues", "show", project, "mail"}, []string{"queue", "show", project, "mail"}},
		{vic, []string{"lanes", "list", project}, []string{"lane", "list", project}},
		{vic, []string{"lanes", "show", id(w.lane)}, []string{"lane", "show", id(w.lane)}},
		{vic, []string{"cases", "list", project}, []string{"case", "list", project}},
		{vic, []string{"cases", "show", id(w.kase)}, []string{"case", "show", id(w.kase)}},
		{vic, []string{"waits", project}, []string{"wait", "list", project}},
		{vic, []string{"waits", "list", project}, []string{"wait", "list", project}},
		{vic, []string{"waits", "--limit", "1", project}, []string{"wait", "list", project, "--limit", "1"}},
		{vic, []string{"dead-letters", project}, []string{"dead-letter", "list", project}},
		{vic, []string{"dead-letters", "list", project}, []string{"dead-letter", "list", project}},
		{vic, []string{"schedules", "list", project}, []string{"schedule", "list", project}},
		{vic, []string{"schedules", "preview", id(w.schedule)}, []string{"schedule", "preview", id(w.schedule)}},
		{rita, []string{"tasks", project}, []string{"task", "list", project}},
		{rita, []string{"tasks", "list", project, "--mine"}, []string{"task", "list", project, "--mine"}},
		{rita, []string{"tasks", "show", id(w.task)}, []string{"task", "show", id(w.task)}},
		{vic, []string{"plans", "list", project}, []string{"plan", "list", project}},
		{vic, []string{"plans", "show", id(w.run)}, []string{"plan", "show", id(w.run)}},
		{vic, []string{"batches", "list", project}, []string{"batch", "list", project}},
		{vic, []string{"batches", "show", id(w.batch)}, []string{"batch", "show", id(w.batch)}},
		// A wrong line is refused alike, named by its singular.
		{vic, []string{"cases", "list"}, []string{"case", "list"}},
		{vic, []string{"tasks"}, []string{"task", "list"}},
		{vic, []string{"plans", "frob"}, []string{"plan", "frob"}},
	} {
		for _, format := range [][]string{nil, {"-o", "json"}} {
			plural := w.as(t, tc.as, append(slices.Clone(tc.plural), format...)...)
			singular := w.as(t, tc.as, append(slices.Clone(tc.singular), format...)...)
			// Ages and times left are the wall clock's, read a moment apart,
			// and a column's width follows its widest age ("9s", "10s").
			plural.stdout = padding.ReplaceAllString(age.ReplaceAllString(plural.stdout, "N"), " ")
			singular.stdout = padding.ReplaceAllString(age.ReplaceAllString(singular.stdout, "N"), " ")
			require.Equal(t, singular, plural, "%v is %v", tc.plural, tc.singular)
		}
	}
	// The singulars read something: the comparison is not of empty lists.
	r := w.as(t, vic, "plan", "list", project)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, id(w.run))
	r = w.as(t, vic, "wait", "list", project)
	require.Contains(t, r.stdout, "reply")
	r = w.as(t, rita, "task", "list", project)
	require.Contains(t, r.stdout, "Release payment P-1")
	r = w.as(t, vic, "plans", "frob")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, `docket plan: unknown subcommand "frob": want list, show`)
}

// plan list lists a project's runs, newest first, with -o json too.
func TestPlanList(t *testing.T) {
	t.Parallel()
	w := setupWorld(t)
	r := w.as(t, vic, "plan", "list", project)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Empty(t, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 3, "the run and the run of the batch's item: %s", r.stdout)
	require.Regexp(t, `^RUN\s+STATUS\s+PLAN`, lines[0])
	require.Regexp(t, `^`+id(w.run)+`\s+running\s`, lines[2], "newest first")
	r = w.as(t, vic, "plan", "list", project, "--limit", "1")
	require.Len(t, strings.Split(strings.TrimSpace(r.stdout), "\n"), 2, r.stdout)
	r = w.as(t, vic, "plan", "list", project, "-o", "json")
	require.Equal(t, exitOK, r.code, r.stderr)
	requireGoldenShape(t, "plan-list", r.stdout)
}

// Help spells every group in the singular, and takes the plural too.
func TestHelpSpeaksSingular(t *testing.T) {
	t.Parallel()
	r := docket(t, nil, "help")
	require.Equal(t, exitOK, r.code, r.stderr)
	for _, noun := range []string{"project", "grant", "actor", "job", "queue", "lane", "case", "wait", "dead-letter",
		"schedule", "task", "plan", "batch"} {
		require.Contains(t, r.stdout, "\n  "+noun+" ", noun)
	}
	for plural := range plurals {
		require.NotContains(t, r.stdout, "\n  "+plural+" ", "the usage lists %s", plural)
	}
	for _, h := range helps {
		noun, _, _ := strings.Cut(h.name, " ")
		_, isPlural := plurals[noun]
		require.False(t, isPlural, "%s is named in the plural", h.name)
	}
	require.Contains(t, r.stdout, `"docket jobs list" is "docket job list"`)

	// The plural's help is the singular's.
	for plural, noun := range plurals {
		if noun == "grant" {
			continue // grant is a command of its own as well as grant list's group
		}
		require.Equal(t, docket(t, nil, "help", noun), docket(t, nil, "help", plural), plural)
		require.Equal(t, docket(t, nil, noun, "--help"), docket(t, nil, plural, "help"), plural)
		r := docket(t, nil, "help", plural, "list")
		require.Equal(t, exitOK, r.code, "%s: %s", plural, r.stderr)
		require.True(t, strings.HasPrefix(r.stdout, "usage: docket "+noun+" list "), "%s: %s", plural, r.stdout)
	}
	require.Equal(t, docket(t, nil, "help", "grant", "list"), docket(t, nil, "help", "grants"))
	r = docket(t, nil, "tasks", "--help")
	require.True(t, strings.HasPrefix(r.stdout, "usage: docket task list PROJECT"), r.stdout)
}
