package console

import (
	"slices"
	"strconv"
	"time"

	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/plans"
)

// Sizes of the pictures, in SVG user units.
const (
	nodeW, nodeH   = 150, 34
	colGap, rowGap = 60, 18
	chartW, chartH = 600, 120
	// chartJobs is the most jobs, newest first, a project's charts are
	// drawn from.
	chartJobs = 1000
)

// dagNode is a step of a run drawn as a box, coloured by its state.
type dagNode struct {
	ID, Kind, State string
	X, Y            int
}

// dagEdge is an arrow from a step to one that runs after it.
type dagEdge struct{ X1, Y1, X2, Y2 int }

// runGraph is a run's plan drawn as its DAG: each step a node, placed in
// the column of its longest path from a first step.
type runGraph struct {
	Width, Height, NodeW, NodeH int
	Nodes                       []dagNode
	Edges                       []dagEdge
}

// graphOf draws the steps of plan with the state of each as the run has
// it, or notYet for a step the run has not admitted.
func graphOf(plan plans.Plan, admitted []plans.RunStep, notYet string) runGraph {
	state := map[string]string{}
	for _, s := range admitted {
		state[s.StepID] = string(s.State)
	}
	after := map[string][]string{}
	var ids []string
	kind := map[string]string{}
	for _, s := range plan.Steps {
		ids = append(ids, s.ID)
		after[s.ID] = s.After
		kind[s.ID] = s.Kind
	}
	// A step admitted under an earlier version stays drawn, first.
	for _, s := range admitted {
		if !slices.Contains(ids, s.StepID) {
			ids = append([]string{s.StepID}, ids...)
			kind[s.StepID] = s.Kind
		}
	}
	col := map[string]int{}
	var depth func(id string, seen int) int
	depth = func(id string, seen int) int {
		if c, ok := col[id]; ok {
			return c
		}
		c := 0
		if seen < len(ids) {
			for _, a := range after[id] {
				c = max(c, depth(a, seen+1)+1)
			}
		}
		col[id] = c
		return c
	}
	rows := map[int]int{}
	g := runGraph{NodeW: nodeW, NodeH: nodeH}
	at := map[string]dagNode{}
	for _, id := range ids {
		c := depth(id, 0)
		n := dagNode{ID: id, Kind: kind[id], State: state[id], X: c * (nodeW + colGap), Y: rows[c] * (nodeH + rowGap)}
		if n.State == "" {
			n.State = notYet
		}
		rows[c]++
		at[id] = n
		g.Nodes = append(g.Nodes, n)
		g.Width = max(g.Width, n.X+nodeW)
		g.Height = max(g.Height, n.Y+nodeH)
	}
	for _, id := range ids {
		to := at[id]
		for _, a := range after[id] {
			if from, ok := at[a]; ok {
				g.Edges = append(g.Edges, dagEdge{X1: from.X + nodeW, Y1: from.Y + nodeH/2, X2: to.X, Y2: to.Y + nodeH/2})
			}
		}
	}
	return g
}

// bar is a minute of a chart: a bar of its height at X.
type bar struct {
	X, Y, H int
	N       int
	At      time.Time
}

// jobCharts are a project's jobs over the last hour, a minute at a time:
// how many finished each minute, and how many were open (queued or
// running) at its end.
type jobCharts struct {
	Project             string
	Width, Height, BarW int
	Throughput          []bar
	MaxThroughput       int
	Depth               string // the polyline's points
	MaxDepth, Drawn     int
	Capped              bool
	From, To            time.Time
}

// chartsOf draws the charts of the hour before now from list, a project's
// newest jobs; capped says list may not hold every job of the hour.
func chartsOf(project string, list []jobs.Job, now time.Time, capped bool) jobCharts {
	const minutes = 60
	end := now.Truncate(time.Minute).Add(time.Minute)
	start := end.Add(-minutes * time.Minute)
	c := jobCharts{Project: project, Width: chartW, Height: chartH, BarW: chartW / minutes, Drawn: len(list), Capped: capped,
		From: start, To: end}
	done := make([]int, minutes)
	open := make([]int, minutes)
	for _, j := range list {
		if !j.FinishedAt.IsZero() && !j.FinishedAt.Before(start) && j.FinishedAt.Before(end) {
			done[int(j.FinishedAt.Sub(start)/time.Minute)]++
		}
		for m := range minutes {
			t := start.Add(time.Duration(m+1) * time.Minute)
			if j.CreatedAt.Before(t) && (j.FinishedAt.IsZero() || !j.FinishedAt.Before(t)) {
				open[m]++
			}
		}
	}
	c.MaxThroughput, c.MaxDepth = max(slices.Max(done), 1), max(slices.Max(open), 1)
	points := make([]byte, 0, minutes*12)
	for m := range minutes {
		h := done[m] * chartH / c.MaxThroughput
		c.Throughput = append(c.Throughput, bar{X: m * c.BarW, Y: chartH - h, H: h, N: done[m], At: start.Add(time.Duration(m) * time.Minute)})
		x, y := m*c.BarW+c.BarW/2, chartH-open[m]*chartH/c.MaxDepth
		if m > 0 {
			points = append(points, ' ')
		}
		points = append(points, []byte(strconv.Itoa(x)+","+strconv.Itoa(y))...)
	}
	c.Depth = string(points)
	return c
}
