package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentrewind/agentrewind/internal/engine/gc/blobsweep"
)

// The sweep's damaged roots reach the person reading the report: a session without its log and a
// checkpoint whose manifest lost a chunk are named, since neither can be restored.
func TestTheGCReportWarnsOfDamagedSessionsAndCheckpoints(t *testing.T) {
	var out bytes.Buffer
	cmd := &cobra.Command{}
	cmd.SetOut(&out)
	rep := &blobsweep.Report{Damaged: []string{"run-7"}, DamagedCheckpoints: []string{"run-7-step-3", "run-9-step-1"}}
	if err := printGCReport(cmd, rep, time.Hour); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"warning: 1 committed session(s) have no events.jsonl",
		"warning: 2 checkpoint(s) have a manifest chunk missing or not matching its digest, so they cannot be restored: run-7-step-3, run-9-step-1",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, out.String())
		}
	}
}
