package controller

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
)

func TestGCOptionsFlagsAndValidation(t *testing.T) {
	parse := func(args ...string) (GCOptions, error) {
		var o GCOptions
		f := pflag.NewFlagSet("manager", pflag.ContinueOnError)
		o.BindFlags(f)
		if err := f.Parse(args); err != nil {
			return o, err
		}
		return o, o.Validate()
	}
	o, err := parse()
	if err != nil {
		t.Fatal(err)
	}
	want := GCOptions{Enabled: true, Interval: 5 * time.Minute, Grace: 7 * 24 * time.Hour, SweepInterval: 24 * time.Hour, SweepMargin: 24 * time.Hour,
		SweepLeaseDuration: time.Minute}
	if d := cmp.Diff(want, o); d != "" {
		t.Errorf("defaults (-want +got):\n%s", d)
	}
	o, err = parse("--gc-dry-run", "--gc-grace=1h", "--gc-namespaces=team-a,team-b", "--gc-sweep-service-account=sweeper", "--gc-checkpoint-keep=3")
	if err != nil || !o.DryRun || o.Grace != time.Hour || len(o.Namespaces) != 2 || o.SweepServiceAccount != "sweeper" || o.CheckpointKeep != 3 {
		t.Errorf("parsed %+v, %v", o, err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--gc-interval=0"}, "--gc-interval"},
		{[]string{"--gc-grace=-1h"}, "--gc-grace"},
		{[]string{"--gc-sweep-lease-duration=1s"}, "--gc-sweep-lease-duration"},
		{[]string{"--gc-namespaces=Team_A"}, "--gc-namespaces"},
		{[]string{"--gc-checkpoint-keep=-1"}, "--gc-checkpoint-keep"},
	} {
		if _, err := parse(tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error naming %s", tc.args, err, tc.want)
		}
	}
}
