package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentrewind/agentrewind/internal/version"
)

func TestVersionCommandPrintsTextAndJSON(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		check func(t *testing.T, out string)
	}{
		{[]string{"version"}, func(t *testing.T, out string) {
			if !strings.HasPrefix(out, "agentrewind "+version.Version+" (commit ") {
				t.Errorf("text output %q", out)
			}
		}},
		{[]string{"version", "-o", "json"}, func(t *testing.T, out string) {
			var info version.Info
			if err := json.Unmarshal([]byte(out), &info); err != nil {
				t.Fatalf("json output %q: %v", out, err)
			}
			if info.Version != version.Version || info.GoVersion == "" || info.Platform == "" {
				t.Errorf("json output missing fields: %+v", info)
			}
		}},
	} {
		var out bytes.Buffer
		cmd := newRootCommand()
		cmd.SetArgs(tc.args)
		cmd.SetOut(&out)
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		tc.check(t, out.String())
	}
}

func TestVersionCommandRejectsUnknownOutput(t *testing.T) {
	cmd := newRootCommand()
	cmd.SetArgs([]string{"version", "-o", "xml"})
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), `--output "xml" is not supported: use text, json or yaml`) {
		t.Fatalf("got %v, want an error naming the flag and the allowed values", err)
	}
}
