//go:build unix

package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// envCLIArgs makes TestHelperCLIProcess run the command line it holds (separated by 0x1f) and exit
// with its exit code, so a test can run a command as a process of its own: with its own stdout, or
// to measure its memory.
const envCLIArgs = "AGENTREWIND_TEST_CLI_ARGS"

func TestHelperCLIProcess(t *testing.T) {
	args := os.Getenv(envCLIArgs)
	if args == "" {
		t.Skip("run by other tests as a process of its own")
	}
	cmd := newRootCommand()
	cmd.SetArgs(strings.Split(args, "\x1f"))
	cmd.SetOut(os.Stdout)
	cmd.SetErr(os.Stderr)
	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(exitCode(err))
	}
	os.Exit(0)
}

// runCLIProcess runs the CLI in a child process with stdout going to stdout, and returns its exit
// code, its stderr and its state.
func runCLIProcess(t *testing.T, stdout io.Writer, args ...string) (int, string, *os.ProcessState) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperCLIProcess$")
	cmd.Env = append(os.Environ(), envCLIArgs+"="+strings.Join(args, "\x1f"))
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), stderr.String(), cmd.ProcessState
}

// TestOutputsToStdoutHoldTheOutputAlone: pack S /dev/stdout and resume-plan --output-file
// /dev/stdout write into the process's stdout (a file here, a pipe in a shell), and their summaries
// go to stderr, so what stdout receives is the bundle or the JSON alone: it unpacks, it decodes.
func TestOutputsToStdoutHoldTheOutputAlone(t *testing.T) {
	session := fixtureSession(t)
	dir := t.TempDir()
	for _, viaFile := range []bool{true, false} {
		var stdout io.Writer
		var got func() []byte
		if viaFile {
			f, err := os.Create(dir + "/stdout")
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			stdout, got = f, func() []byte { data, _ := os.ReadFile(f.Name()); return data }
		} else {
			var buf bytes.Buffer // a pipe: exec copies the child's stdout into it
			stdout, got = &buf, buf.Bytes
		}
		code, stderr, _ := runCLIProcess(t, stdout, "pack", session, "/dev/stdout")
		if code != 0 || !strings.Contains(stderr, "wrote /dev/stdout") {
			t.Fatalf("pack into /dev/stdout (file %v): exit %d, stderr %s", viaFile, code, stderr)
		}
		bundle := dir + "/b.rewind"
		if err := os.WriteFile(bundle, got(), 0o644); err != nil {
			t.Fatal(err)
		}
		out := t.TempDir() + "/unpacked"
		if _, err := runCLI(t, "unpack", bundle, out); err != nil {
			t.Fatalf("unpacking what pack wrote to stdout (file %v): %v", viaFile, err)
		}
	}
	var buf bytes.Buffer
	code, stderr, _ := runCLIProcess(t, &buf, "engine", "resume-plan", "--session", session, "--output-file", "/dev/stdout")
	if code != 0 || !strings.Contains(stderr, "fixture: ") {
		t.Fatalf("resume-plan into /dev/stdout: exit %d, stderr %s", code, stderr)
	}
	decodePlan(t, buf.Bytes())
}
