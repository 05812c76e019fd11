package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// longNote is agent output with no place to break it: a long run of links.
var longNote = "label applied; evidence: " + strings.Repeat("https://tracker.example.internal/issues/12/comments/", 8)

// noisyTriageAgent is the triage agent that, once it has labelled the issue, notes its evidence in one
// long line and notifies the owners through a tool with a long name from a long call site.
func noisyTriageAgent(system string) replay.Harness {
	inner := triageAgent(system)
	return func(ctx context.Context, ac replay.AgentContext) error {
		if err := inner(ctx, ac); err != nil {
			return err
		}
		ac.Note(ctx, longNote)
		_, err := ac.Tool(ctx, "notify_owners_of_the_component_named_in_codeowners", map[string]string{"team": strings.Repeat("platform-", 20)},
			replay.Site("triage.notify.owners.of.the.component.after.labelling"))
		return err
	}
}

// forkTriageToGoal forks parent at the decide step with the CODEOWNERS prompt fix, as a ForkRun with a
// goal does, into session id under root: the fork labels the issue needs-owner-review (its goal), then
// runs on with long lines the parent never had.
func forkTriageToGoal(t testing.TB, root, id string, parent *session.Session) {
	t.Helper()
	fix := fixedSystem
	res, err := replay.Fork(context.Background(), replay.ForkOptions{Config: replay.Config{Now: steadyClock()}, Parent: parent, Dir: filepath.Join(root, id), ID: id,
		AtStep: decideStep, Model: &triageModel{}, Overrides: replay.Overrides{System: &fix}, OnMiss: replay.OnMissStub,
		Goal: &replay.Goal{Tool: "add_label", ArgsMatch: json.RawMessage(`{"label":"needs-owner-review"}`)}}, noisyTriageAgent(triageSystem))
	if err != nil {
		t.Fatal(err)
	}
	if res.ReachedGoal == nil || !*res.ReachedGoal {
		t.Fatalf("the fixture's fork did not reach its goal")
	}
}

// forkTriageDrifted forks parent at the decide step with an agent whose system prompt differs from the
// recording's from its first call, under Passthrough: its prefix drifts at the plan step, before the
// fork point.
func forkTriageDrifted(t testing.TB, root, id string, parent *session.Session) {
	t.Helper()
	fix := fixedSystem
	_, err := replay.Fork(context.Background(), replay.ForkOptions{Config: replay.Config{Now: steadyClock()}, Parent: parent, Dir: filepath.Join(root, id), ID: id,
		AtStep: decideStep, Model: &triageModel{}, Overrides: replay.Overrides{System: &fix}, OnMiss: replay.OnMissStub, DriftPolicy: replay.Passthrough},
		triageAgent(strings.Replace(triageSystem, "Label", "Tag", 1)))
	if err != nil {
		t.Fatal(err)
	}
}

// textWidthJS defines textWidth(cell): the width the cell's text takes on one line in the cell's font,
// padding included (a cut table cell's scrollWidth does not say).
const textWidthJS = `window.textWidth = (c) => {
  const cs = getComputedStyle(c), s = document.createElement('span');
  Object.assign(s.style, { font: cs.font, whiteSpace: 'pre', position: 'absolute', visibility: 'hidden' });
  s.textContent = c.textContent;
  document.body.appendChild(s);
  const w = s.getBoundingClientRect().width;
  s.remove();
  return w + parseFloat(cs.paddingLeft) + parseFloat(cs.paddingRight); // clientWidth's measure
};`

// sideWidths measures the fork table at the size the page is: for each side, the width of its cells in
// the first body row that has both, the widest row height, and which fixed-width cells cut their text.
const sideWidths = `(() => {
  const t = document.getElementById('fork');
  const row = [...t.tBodies[0].rows].find((r) => [...r.cells].every((c) => c.colSpan === 1));
  const half = (row.cells.length - 1) / 2;
  const w = (from, to) => [...row.cells].slice(from, to).reduce((a, c) => a + c.getBoundingClientRect().width, 0);
  // Kind, tokens, cost and source have fixed widths for their longest values; call sites and what
  // the call was are free text, cut where they are long.
  const cut = [...t.querySelectorAll('td.c-kind, td.c-tokens, td.c-cost, td.c-src')].filter((c) => textWidth(c) > c.clientWidth)
    .map((c) => c.closest('tr').dataset.step + ':' + c.className + ':' + c.textContent);
  return {
    table: t.getBoundingClientRect().width,
    parent: w(1, 1 + half), fork: w(1 + half, 1 + 2 * half),
    parentWhat: row.cells[3].getBoundingClientRect().width, forkWhat: row.cells[3 + half].getBoundingClientRect().width,
    tallest: Math.max(...[...t.tBodies[0].rows].map((r) => r.getBoundingClientRect().height)),
    cut,
  };
})()`

type forkTableSize struct {
	Table, Parent, Fork, ParentWhat, ForkWhat, Tallest float64
	Cut                                                []string
}

// redBackgrounds lists the elements of the page painted in the drift colour, by id or text.
const redBackgrounds = `[...document.querySelectorAll('#main *')].filter((e) => getComputedStyle(e).backgroundColor === 'rgb(253, 231, 229)').map((e) => e.id || e.tagName + ':' + e.textContent.slice(0, 60))`

// TestBrowserForkViewShowsTheForkPointBesideEqualColumns: at 1400 px, a fork that reached its goal is
// shown beside its parent in two sides of equal width whose fixed columns hold their text on one line
// (a long value is cut with an ellipsis, not allowed to squeeze the other side), and its fork point is
// the change it made (the override, the request diff), with nothing painted red. A fork that drifted
// before its fork point is red there.
func TestBrowserForkViewShowsTheForkPointBesideEqualColumns(t *testing.T) {
	ctx := browserSized(t, 1400, 900)
	root := t.TempDir()
	parent := recordTriage(t, root)
	forkTriageToGoal(t, root, "triage-goal", parent)
	forkTriageDrifted(t, root, "triage-drift", parent)
	ts := serve(t, root, Options{})

	run(t, ctx, "opening the fork", chromedp.Navigate(ts.URL+"/#/s/triage-goal/fork"), visible(`#fork tr[data-step="9"]`))
	eval[any](t, ctx, textWidthJS)
	size, err := chromedp.Run(ctx, chromedp.Evaluate[forkTableSize](sideWidths))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fork table at 1400 px: %+v", size)
	if d := size.Parent - size.Fork; d > 1 || d < -1 {
		t.Errorf("the parent's side is %.0f px and the fork's %.0f px: want them equal", size.Parent, size.Fork)
	}
	if size.ParentWhat < 180 || size.ForkWhat < 180 {
		t.Errorf("the What columns are %.0f and %.0f px: want at least 180 px each", size.ParentWhat, size.ForkWhat)
	}
	if size.Tallest > 40 {
		t.Errorf("a row is %.0f px high: a long value wrapped instead of being cut", size.Tallest)
	}
	if len(size.Cut) > 0 {
		t.Errorf("fixed columns too narrow for their text: %v", size.Cut)
	}
	if size.Table > 1400 {
		t.Errorf("the table is %.0f px wide, wider than the window", size.Table)
	}
	// A cut value is whole in its cell's title (as far as the row carries it: the step view has all).
	if cut := eval[[]string](t, ctx, `[...document.querySelectorAll('#fork td')].filter((c) => textWidth(c) > c.clientWidth && c.title !== c.textContent).map((c) => c.textContent)`); len(cut) != 0 {
		t.Errorf("cells cut without their text in a title: %q", cut)
	}
	if n := eval[int](t, ctx, `[...document.querySelectorAll('#fork td')].filter((c) => c.textContent.startsWith('label applied') && textWidth(c) > c.clientWidth).length`); n != 1 {
		t.Errorf("the long note is in %d cut cells, want 1", n)
	}

	// The fork point is what the fork changed, not an error.
	if n := count(t, ctx, "#divergence, #fork tr.diverged"); n != 0 {
		t.Errorf("a fork that reached its goal shows %d drift marks", n)
	}
	if red := eval[[]string](t, ctx, redBackgrounds); len(red) != 0 {
		t.Errorf("painted red: %v", red)
	}
	if step := textOf(t, ctx, "#fork-point-step"); step != fmt.Sprint(decideStep) {
		t.Errorf("fork point shown at step %s, want %d", step, decideStep)
	}
	if changes := textOf(t, ctx, "#fork-point-changes"); changes != "system prompt" {
		t.Errorf("the fork point's change is %q, want the system prompt", changes)
	}
	if diff := textOf(t, ctx, "#fork-point-diff"); !strings.Contains(diff, "request.system") || !strings.Contains(diff, "CODEOWNERS") {
		t.Errorf("the fork point does not show the request diff:\n%s", diff)
	}
	if marked := eval[[]string](t, ctx, `[...document.querySelectorAll('#fork tr.fork-point')].map((r) => r.dataset.step)`); len(marked) != 1 || marked[0] != fmt.Sprint(decideStep) {
		t.Errorf("fork-point rows %v, want only step %d", marked, decideStep)
	}
	screenshot(t, ctx, "fork-1400.png")

	// The fork's own timeline marks its fork point in the accent colour, not as drift.
	run(t, ctx, "opening the fork's timeline", chromedp.Navigate(ts.URL+"/#/s/triage-goal"), visible(`#timeline-rows .row[data-step="9"]`))
	if marked := eval[[]string](t, ctx, `[...document.querySelectorAll('#timeline-rows .row.forkpoint')].map((r) => r.dataset.step)`); len(marked) != 1 || marked[0] != fmt.Sprint(decideStep) {
		t.Errorf("the timeline marks %v as the fork point, want only step %d", marked, decideStep)
	}
	if n := count(t, ctx, "#timeline-rows .mark.diverged"); n != 0 {
		t.Errorf("the timeline marks %d drift steps on a fork that did not drift", n)
	}

	// A fork whose served prefix drifted is red where it drifted, and its rows start there.
	run(t, ctx, "opening the drifted fork", chromedp.Navigate(ts.URL+"/#/s/triage-drift/fork"), visible("#divergence-step"))
	if step := textOf(t, ctx, "#divergence-step"); step != fmt.Sprint(planStep) {
		t.Errorf("drift shown at step %s, want %d", step, planStep)
	}
	if rows := eval[[]string](t, ctx, `[...document.querySelectorAll('#fork tr.diverged')].map((r) => r.dataset.step)`); len(rows) != 1 || rows[0] != fmt.Sprint(planStep) {
		t.Errorf("drift rows %v, want only step %d", rows, planStep)
	}
	if red := eval[[]string](t, ctx, redBackgrounds); len(red) == 0 {
		t.Errorf("a drifted fork is painted red nowhere")
	}
	screenshot(t, ctx, "fork-drift-1400.png")
}
