package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// errHelp is returned by a command that printed its usage because it was
// asked to: the run exits 0.
var errHelp = errors.New("help requested")

// The global flags, which every command takes anywhere on its command line.
const (
	flagURL     = "database-url"
	flagAs      = "as"
	flagReplica = "replica-url"
	flagCell    = "cell"
)

// isGlobal reports whether name is a global flag's.
func isGlobal(name string) bool {
	return name == flagURL || name == flagAs || name == flagReplica || name == flagCell
}

// flags returns the flag set of command name ("job list"), holding the
// global flags; the command adds its own.
func (c *cli) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.url, flagURL, c.url, "the Postgres `URL` (default $DOCKET_DATABASE_URL, else $DATABASE_URL)")
	fs.StringVar(&c.as, flagAs, c.as, "the `ACTOR` changes are recorded as made by (default $DOCKET_ACTOR, else user:$USER)")
	fs.StringVar(&c.replicaURL, flagReplica, c.replicaURL,
		"a hot standby's Postgres `URL` to read from, saying its lag (default $DOCKET_REPLICA_URL); writes go to --database-url")
	fs.Var(&c.cells, flagCell, "a cell, `NAME=URL`, repeated: job list and job census read every cell named, each row naming its cell")
	return fs
}

// Output formats of the read commands.
const (
	formatText = "text"
	formatJSON = "json"
)

// outputFlag adds --output FORMAT, its short form -o and the alias --json
// to fs, and returns where the chosen format lands.
func outputFlag(fs *flag.FlagSet) *string {
	format := formatText
	v := formatValue{&format}
	fs.Var(v, "output", "the output `FORMAT`, text or json; --json is short for --output json")
	fs.Var(v, "o", "short for --output")
	fs.BoolFunc("json", "short for --output json", func(s string) error {
		on, err := strconv.ParseBool(s)
		if err != nil {
			return err
		}
		if on {
			format = formatJSON
		}
		return nil
	})
	return &format
}

type formatValue struct{ p *string }

func (f formatValue) String() string {
	if f.p == nil {
		return formatText
	}
	return *f.p
}

func (f formatValue) Set(s string) error {
	if s != formatText && s != formatJSON {
		return errors.New("want text or json")
	}
	*f.p = s
	return nil
}

// aliases are the flags the usage shows on the line of another.
var aliases = map[string]string{"o": "output", "json": "output"}

// parse reads the command line args of the command fs is named for: flags
// (-f or --f, with their value as the next argument or after "=") before,
// between and after the positional arguments, until "--". An argument that
// looks like a negative number and names no flag is positional. want names
// the positional arguments, an optional one in brackets ("[ROLE]"), the last
// one ending in "..." ("[REVISION...]") taking every argument left; parse
// refuses too few or too many and returns them in order, "" for an optional
// one left out. -h, -help and
// --help print the command's usage to stdout and return errHelp.
func (c *cli) parse(fs *flag.FlagSet, args []string, want ...string) ([]string, error) {
	var pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			pos = append(pos, a)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimPrefix(a[1:], "-"), "=")
		if name == "h" || name == "help" {
			c.printHelp(fs)
			return nil, errHelp
		}
		f := fs.Lookup(name)
		if f == nil {
			if _, err := strconv.ParseFloat(a, 64); err == nil {
				pos = append(pos, a)
				continue
			}
			var names []string
			fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
			return nil, usageOf(fs, "unknown flag %s%s", flagText(name), didYouMean(name, names, flagText))
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() && !hasValue {
			value, hasValue = "true", true
		}
		if !hasValue {
			if i+1 == len(args) {
				return nil, usageOf(fs, "%s needs a value", flagText(name))
			}
			i++
			value = args[i]
		}
		if err := fs.Set(f.Name, value); err != nil {
			return nil, usageOf(fs, "%s %q: %s", flagText(f.Name), value, valueProblem(f, err))
		}
	}
	return positionals(fs, pos, want)
}

// flagText is flag name as a command line spells it: -o, --output.
func flagText(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// positionals checks the positional arguments pos against want (see parse).
func positionals(fs *flag.FlagSet, pos, want []string) ([]string, error) {
	required := 0
	for i, w := range want {
		if !strings.HasPrefix(w, "[") {
			required = i + 1
		}
	}
	if len(pos) < required {
		return nil, usageOf(fs, "missing %s", strings.Join(want[len(pos):required], " "))
	}
	if len(pos) > len(want) && len(want) > 0 && strings.HasSuffix(strings.TrimSuffix(want[len(want)-1], "]"), "...") {
		want = append(slices.Clone(want), slices.Repeat(want[len(want)-1:], len(pos)-len(want))...)
	}
	if len(pos) > len(want) {
		if len(want) == 0 {
			return nil, usageOf(fs, "unexpected argument %q: %s takes none", pos[len(want)], fs.Name())
		}
		return nil, usageOf(fs, "unexpected argument %q after %s", pos[len(want)], strings.Join(want, " "))
	}
	for i, p := range pos {
		if p == "" && i < len(want) {
			return nil, usageOf(fs, "%s is empty", want[i])
		}
	}
	for len(pos) < len(want) {
		pos = append(pos, "")
	}
	return pos, nil
}

// valueProblem says what is wrong with the value the flag package's Set of
// f refused.
func valueProblem(f *flag.Flag, err error) string {
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return err.Error()
	}
	switch g.Get().(type) {
	case int, int64, uint, uint64:
		if strings.Contains(err.Error(), "range") {
			return "out of range"
		}
		return "not a number"
	case bool:
		return "want true or false"
	case time.Duration:
		return "not a duration such as 90s or 5m"
	}
	return err.Error()
}

// usageOf is a wrong command line of the command fs is named for.
func usageOf(fs *flag.FlagSet, format string, args ...any) error {
	return usageErr{cmd: fs.Name(), error: fmt.Errorf(format, args...)}
}

// badLimit refuses --limit n outside 1..max.
func badLimit(fs *flag.FlagSet, name string, n, max int) error {
	if n < 1 || n > max {
		return usageOf(fs, "--%s %d: want 1..%d", name, n, max)
	}
	return nil
}

// positiveID parses arg, the positional argument name of the command fs is
// named for, as the id of a noun (job, lane, case...).
func positiveID(fs *flag.FlagSet, name, arg, noun string) (int64, error) {
	id, err := strconv.ParseInt(arg, 10, 64)
	if err != nil || id < 1 {
		return 0, usageOf(fs, "%s %q: want a positive %s id", name, arg, noun)
	}
	return id, nil
}

// printHelp prints the usage of the command fs is named for: its synopsis,
// its description and its flags with their defaults.
func (c *cli) printHelp(fs *flag.FlagSet) {
	h, _ := helpOf(fs.Name())
	w := c.stdout
	fmt.Fprintf(w, "usage: docket %s\n", h.synopsis())
	if h.about != "" {
		fmt.Fprintf(w, "\n%s\n", strings.Join(wrap(h.about, 76), "\n"))
	}
	var lines [][2]string
	fs.VisitAll(func(f *flag.Flag) {
		if _, alias := aliases[f.Name]; alias || isGlobal(f.Name) {
			return
		}
		name, usage := flag.UnquoteUsage(f)
		head := "--" + f.Name
		if f.Name == "output" {
			head = "-o, --output"
		}
		if name != "" {
			head += " " + name
		}
		if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" {
			usage += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		lines = append(lines, [2]string{head, usage})
	})
	if len(lines) > 0 {
		fmt.Fprintln(w, "\nflags:")
		printColumns(w, lines)
	}
	fmt.Fprintln(w, "\nglobal flags, anywhere on the line:")
	printColumns(w, [][2]string{
		{"--database-url URL", "the Postgres URL (default $DOCKET_DATABASE_URL, else $DATABASE_URL)"},
		{"--as ACTOR", "the actor changes are recorded as made by (default $DOCKET_ACTOR, else user:$USER)"},
		{"--replica-url URL", "a hot standby to read from, saying its lag (default $DOCKET_REPLICA_URL); writes go to --database-url"},
		{"--cell NAME=URL", "a cell, repeated: job list and job census read every cell named, each row naming its cell; serve serves each"},
	})
}

// printColumns prints pairs as an indented two-column list, the second
// column wrapped.
func printColumns(w io.Writer, lines [][2]string) {
	width := 0
	for _, l := range lines {
		width = max(width, len(l[0]))
	}
	width = min(width, 28)
	for _, l := range lines {
		text := strings.Join(wrap(l[1], 76-width-4), "\n"+strings.Repeat(" ", width+4))
		if len(l[0]) > width {
			fmt.Fprintf(w, "  %s\n  %s  %s\n", l[0], strings.Repeat(" ", width), text)
			continue
		}
		fmt.Fprintf(w, "  %-*s  %s\n", width, l[0], text)
	}
}

// wrap breaks each paragraph of text, a line of its own, into lines of at
// most width characters where it can.
func wrap(text string, width int) []string {
	var out []string
	for _, para := range strings.Split(text, "\n") {
		line, n := "", 0
		for _, w := range strings.Fields(para) {
			k := utf8.RuneCountInString(w)
			if n > 0 && n+1+k > width {
				out = append(out, line)
				line, n = "", 0
			}
			if n > 0 {
				line, n = line+" ", n+1
			}
			line, n = line+w, n+k
		}
		out = append(out, line)
	}
	return out
}

// sub splits the command line of the group command group ("job") into its
// subcommand and the rest: "help", -h or --help, alone or before a
// subcommand, print the group's or the subcommand's usage.
func (c *cli) sub(group string, args []string) (string, []string, error) {
	args, err := c.leadingGlobals(group, args)
	if err != nil {
		return "", nil, err
	}
	if len(args) == 0 {
		return "", nil, usageErr{cmd: group, error: fmt.Errorf("missing subcommand: %s", strings.Join(subcommands(group), ", "))}
	}
	sub, rest := args[0], args[1:]
	if sub == "help" || sub == "-h" || sub == "-help" || sub == "--help" {
		if len(rest) > 0 {
			return rest[0], []string{"--help"}, nil
		}
		c.printGroupHelp(group)
		return "", nil, errHelp
	}
	if _, ok := helpOf(group + " " + sub); !ok {
		return "", nil, usageErr{cmd: group, error: fmt.Errorf("unknown subcommand %q%s: want %s", sub,
			didYouMean(sub, subcommands(group), nil), strings.Join(subcommands(group), ", "))}
	}
	return sub, rest, nil
}

// leadingGlobals reads the global flags at the start of args, the command
// line of command name, and returns the rest.
func (c *cli) leadingGlobals(name string, args []string) ([]string, error) {
	fs := c.flags(name)
	for len(args) > 0 {
		flagName, value, hasValue := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(args[0], "-"), "-"), "=")
		if !strings.HasPrefix(args[0], "-") || !isGlobal(flagName) {
			break
		}
		args = args[1:]
		if !hasValue {
			if len(args) == 0 {
				return nil, usageOf(fs, "--%s needs a value", flagName)
			}
			value, args = args[0], args[1:]
		}
		_ = fs.Set(flagName, value)
	}
	return args, nil
}

// subcommands lists the subcommands of group.
func subcommands(group string) []string {
	var subs []string
	for _, h := range helps {
		if s, ok := strings.CutPrefix(h.name, group+" "); ok {
			subs = append(subs, s)
		}
	}
	return subs
}

func (c *cli) printGroupHelp(group string) {
	fmt.Fprintf(c.stdout, "usage: docket %s SUBCOMMAND [ARGS] [flags]\n\nsubcommands:\n", group)
	var lines [][2]string
	for _, h := range helps {
		if strings.HasPrefix(h.name, group+" ") {
			lines = append(lines, [2]string{h.synopsis(), h.summary})
		}
	}
	printColumns(c.stdout, lines)
	fmt.Fprintf(c.stdout, "\nRun \"docket help %s SUBCOMMAND\" for one's flags.\n", group)
}

// printUsage prints the usage of docket: every command with its summary.
func (c *cli) printUsage() {
	fmt.Fprint(c.stdout, "usage: docket COMMAND [ARGS] [flags]\n\ncommands:\n")
	var lines [][2]string
	for _, h := range helps {
		lines = append(lines, [2]string{h.synopsis(), h.summary})
	}
	printColumns(c.stdout, lines)
	fmt.Fprint(c.stdout, `
Flags go before or after the arguments. Every command takes the global flags
--database-url URL (default $DOCKET_DATABASE_URL, else $DATABASE_URL) and
--as ACTOR, the actor changes are recorded as made by (default $DOCKET_ACTOR,
else user:$USER), --replica-url URL, a hot standby the read commands read from
(default $DOCKET_REPLICA_URL), and --cell NAME=URL, repeated, the cells job
list and job census read across. The read commands take -o json. Run "docket help COMMAND"
or "docket COMMAND --help" for a command's flags.

Each noun also takes its plural: "docket jobs list" is "docket job list", and
"docket tasks PROJECT" is "docket task list PROJECT".

Exit codes: 0 done; 1 failed; 2 a wrong command line; 3 status --check found
migrations pending.
`)
}

// help answers "docket help [COMMAND [SUBCOMMAND]]".
func (c *cli) help(args []string) error {
	if len(args) == 0 {
		c.printUsage()
		return errHelp
	}
	if args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
		c.printHelp(c.flags("help"))
		return errHelp
	}
	noun, ok := plurals[args[0]]
	if !ok {
		noun = args[0]
	}
	name := strings.Join(append([]string{noun}, args[1:]...), " ")
	if _, ok := helpOf(name); !ok {
		if len(subcommands(name)) > 0 {
			c.printGroupHelp(name)
			return errHelp
		}
		return usageErr{cmd: "help", error: fmt.Errorf("unknown command %q", name)}
	}
	return nil
}

// cmdHelp is what the usage of one command says.
type cmdHelp struct {
	name    string // "job list"
	args    string // its positional arguments and main flags: "PROJECT [--state S]"
	summary string // one line for the list of commands
	about   string // a paragraph for its own usage
}

func (h cmdHelp) synopsis() string {
	if h.args == "" {
		return h.name
	}
	return h.name + " " + h.args
}

func helpOf(name string) (cmdHelp, bool) {
	i := slices.IndexFunc(helps, func(h cmdHelp) bool { return h.name == name })
	if i < 0 {
		return cmdHelp{name: name}, false
	}
	return helps[i], true
}

// didYouMean suggests the one of known closest to got, when it is close
// (at most two edits, fewer than got has characters): ` (did you mean
// "x"?)`. show spells it, when given.
func didYouMean(got string, known []string, show func(string) string) string {
	best, bestD := "", 3
	for _, k := range known {
		if d := editDistance(got, k); d < bestD && d < len(got) {
			best, bestD = k, d
		}
	}
	if best == "" {
		return ""
	}
	if show != nil {
		return fmt.Sprintf(" (did you mean %s?)", show(best))
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// editDistance is the Levenshtein distance of a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
