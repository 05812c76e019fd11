//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The session every scenario starts from: the proxy-agent example triaging issue #42, recorded once on
// this machine through `agentrewind proxy --mode record` in front of the add-on fake model, then
// pushed to the in-cluster store by each test under its own namespace's prefix, as a user would.
// recordedID is the session's id, new in every run: the store sync's namespace and the store outlive a
// run when the cluster is reused, and the sync test must see this run's push.
var recordedID = fmt.Sprintf("triage-%04x", rand.IntN(1<<16))

const (
	// The recording's steps (agentrewind inspect): 0 session_start, 1 START, 2 entropy, 3 INTENT
	// (steps search and label, done by search_issues and add_label), 4 model call (plan),
	// 5 search_issues, 6 STEP_CLAIMED search, 7 model call (the labelling decision), 8 add_label,
	// 9 STEP_CLAIMED label, 10 model call (report), 11 ANCHOR (the recorder's, minted when the agent
	// asked for a checkpoint; the run goes on), 12 END (the recorder's word on how the run ended),
	// 13 session_end. Both steps are witnessed by the recorded tool answers: the run is COMPLETE.
	recordedEvents   = 14
	recordedModels   = 3
	recordedTools    = 2
	decisionStep     = 7  // the flawed decision a fork at this step fixes
	firstModelStep   = 4  // where a changed agent's first request leaves the recording
	anchorStep       = 11 // the recorder's ANCHOR: the step of the Checkpoint the operator mints
	providerKeyValue = "sk-ant-e2e-provider-key-0123456789"
	workspaceHead    = "4a4b4c4d4e4f505152535455565758595a5b5c5d"
)

// The agent's one-line fix (examples/proxy-agent FixedPrompt): the flawed prompt plus the CODEOWNERS
// rule the fake model's script answers with needs-owner-review.
const (
	flawedPrompt = "You are the triage bot of the editor team. Search for related issues, then label the new issue."
	fixedPrompt  = flawedPrompt + " Check CODEOWNERS: a crash in owned code is labelled needs-owner-review."
)

// recordingDir holds sessions/<recordedID>, recorded by TestMain.
var recordingDir string

// recordedSession is the committed session directory.
func recordedSession() string { return filepath.Join(recordingDir, "sessions", recordedID) }

// recordSession records the agent's run: the proxy in record mode on loopback, its upstream the add-on
// fake model's Service, its tools the agent's stand-in tracker, then SIGTERM commits the session.
func recordSession(ctx context.Context) error {
	start := time.Now()
	var err error
	if recordingDir, err = os.MkdirTemp("", "agentrewind-e2e-"); err != nil {
		return err
	}
	var svc corev1.Service
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: systemNamespace, Name: fakeLLMService}, &svc); err != nil {
		return err
	}
	upstream := fmt.Sprintf("http://%s:%d", svc.Spec.ClusterIP, fakeLLMPort)
	trackerAddr, proxyAddr := freeAddr(), freeAddr()
	logs := &bytes.Buffer{}

	tracker := exec.Command(agentBin, "tracker", trackerAddr)
	tracker.Stdout, tracker.Stderr = logs, logs
	if err := tracker.Start(); err != nil {
		return err
	}
	defer func() { _ = tracker.Process.Kill(); _ = tracker.Wait() }()

	proxy := exec.Command(agentrewindBin, "proxy", "--mode", "record", "--listen", proxyAddr,
		"--session-dir", filepath.Join(recordingDir, "sessions"), "--session-id", recordedID,
		"--anthropic-upstream", upstream, "--workspace-head", workspaceHead,
		"--tool", "search_issues=http://"+trackerAddr+"/search", "--tool", "add_label=http://"+trackerAddr+"/label")
	proxy.Env = append(os.Environ(), "ANTHROPIC_API_KEY="+providerKeyValue)
	proxy.Stdout, proxy.Stderr = logs, logs
	if err := proxy.Start(); err != nil {
		return err
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = proxy.Process.Kill()
			_ = proxy.Wait()
		}
	}()
	if err := waitHTTP(ctx, "http://"+proxyAddr+"/readyz", 30*time.Second); err != nil {
		return fmt.Errorf("the recording proxy: %w\n%s", err, logs)
	}

	agent := exec.CommandContext(ctx, agentBin)
	agent.Env = append(os.Environ(), "ANTHROPIC_BASE_URL=http://"+proxyAddr, "ANTHROPIC_API_KEY=placeholder")
	out, err := agent.CombinedOutput()
	if err != nil {
		return fmt.Errorf("the agent under the recording proxy: %w\n%s\n%s", err, out, logs)
	}
	if !strings.Contains(string(out), "labelled bug") {
		return fmt.Errorf("the recorded agent should make its flawed decision (label bug), it printed:\n%s", out)
	}
	_ = proxy.Process.Signal(syscall.SIGTERM)
	stopped = true
	if err := proxy.Wait(); err != nil {
		return fmt.Errorf("committing the recording: %w\n%s", err, logs)
	}
	meta, err := readMeta(recordedSession())
	if err != nil {
		return err
	}
	if meta.Events != recordedEvents {
		return fmt.Errorf("the recording holds %d events, want %d (did the agent or the script change?)", meta.Events, recordedEvents)
	}
	events, err := os.ReadFile(filepath.Join(recordedSession(), "events.jsonl"))
	if err != nil {
		return err
	}
	if lines := bytes.Split(events, []byte("\n")); !isLedger(lines[anchorStep], "ANCHOR") {
		return fmt.Errorf("step %d of the recording is not the recorder's ANCHOR: %.120s", anchorStep, lines[anchorStep])
	}
	fmt.Fprintf(os.Stderr, "e2e: recorded %s (%d events) in %s\n", recordedID, meta.Events, time.Since(start).Round(100*time.Millisecond))
	return nil
}

// sessionMeta is what the suite reads of a session's meta.json.
type sessionMeta struct {
	ID         string `json:"id"`
	EventsHash string `json:"eventsHash"`
	Events     int64  `json:"events"`
}

func readMeta(dir string) (sessionMeta, error) {
	var m sessionMeta
	raw, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if err != nil {
		return m, err
	}
	return m, json.Unmarshal(raw, &m)
}

// pushSession pushes a session directory to the in-cluster store under namespace ns's prefix of the
// default store, with the agentrewind CLI.
func pushSession(t *testing.T, dir, ns string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), agentrewindBin, "push", dir, "--store", "s3://"+storeBucket+"/"+ns,
		"--endpoint", storeEndpoint, "--create-bucket")
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+storeAccessKey, "AWS_SECRET_ACCESS_KEY="+storeSecretKey)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("agentrewind push %s: %v\n%s", dir, err, out)
	}
}

// parkedSession is a copy of the recording cut after its ANCHOR, as a run the recorder never closed
// leaves it (the agent asked for a checkpoint, then its pod died): without the recorder's END and
// session_end the anchor is where the run stands, so the operator snapshots the workspace for the
// Checkpoint it mints there.
func parkedSession(t *testing.T) string {
	t.Helper()
	return rewriteSession(t, recordedID, func(line []byte, last bool) bool {
		if last && !bytes.Contains(line, []byte(`"kind":"session_end"`)) {
			t.Fatalf("the recording's last event is not session_end: %s", line)
		}
		return !last && !isLedger(line, "END")
	})
}

// copiedSession is the whole recording under another id: the same finished run, COMPLETE.
func copiedSession(t *testing.T, id string) string {
	t.Helper()
	return rewriteSession(t, id, func([]byte, bool) bool { return true })
}

// crashedSession is a copy of the recording under another id cut right after the search step's
// STEP_CLAIMED, as a run whose pod died before its labelling decision leaves it: no later model call,
// no add_label, no ANCHOR, END or session_end. The recorded search_issues answer witnesses search and
// nothing witnesses label, so its resume verdict is RESUMABLE with the residual [label].
func crashedSession(t *testing.T, id string) string {
	t.Helper()
	claimed := false
	return rewriteSession(t, id, func(line []byte, _ bool) bool {
		if claimed {
			return false
		}
		if isLedger(line, "STEP_CLAIMED") {
			if !bytes.Contains(line, []byte(`"step":"search"`)) {
				t.Fatalf("the recording's first STEP_CLAIMED is not the search step's: %s", line)
			}
			claimed = true
		}
		return true
	})
}

// goallessSession is a copy of the recording under another id without the agent's ledger records
// (INTENT, STEP_CLAIMED) and the recorder's ANCHOR: a run that declared no goal, so its resume
// verdict is UNRESUMABLE (NoIntent), it holds no anchor, and the garbage collector may collect it.
func goallessSession(t *testing.T, id string) string {
	t.Helper()
	return rewriteSession(t, id, func(line []byte, _ bool) bool {
		for _, op := range []string{"INTENT", "STEP_CLAIMED", "ANCHOR"} {
			if isLedger(line, op) {
				return false
			}
		}
		return true
	})
}

// isLedger says whether an event line is a ledger record with op.
func isLedger(line []byte, op string) bool {
	return bytes.Contains(line, []byte(`"kind":"ledger"`)) && bytes.Contains(line, []byte(`"op":"`+op+`"`))
}

// eventNumbers are the seq and step every event line starts with.
var eventNumbers = regexp.MustCompile(`^\{"seq":\d+,"step":\d+,`)

// rewriteSession copies the recording into a new session directory named id, keeping the events keep
// says to keep (numbered again from 0), with meta.json's id, event count and events hash to match.
func rewriteSession(t *testing.T, id string, keep func(line []byte, last bool) bool) string {
	t.Helper()
	src := recordedSession()
	dst := filepath.Join(t.TempDir(), id)
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	events, err := os.ReadFile(filepath.Join(src, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	meta, err := readMeta(src)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSuffix(events, []byte("\n")), []byte("\n"))
	var out bytes.Buffer
	n := 0
	for i, line := range lines {
		if !keep(line, i == len(lines)-1) {
			continue
		}
		if !eventNumbers.Match(line) {
			t.Fatalf("event line %d does not start with its seq and step: %.80s", i, line)
		}
		line = eventNumbers.ReplaceAll(line, []byte(fmt.Sprintf(`{"seq":%d,"step":%d,`, n, n)))
		if n == 0 { // session_start carries the meta, id included
			line = bytes.Replace(line, []byte(`"id":"`+meta.ID+`"`), []byte(`"id":"`+id+`"`), 1)
		}
		out.Write(line)
		out.WriteByte('\n')
		n++
	}
	if err := os.WriteFile(filepath.Join(dst, "events.jsonl"), out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(src, "meta.json"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(out.Bytes())
	fixed := strings.Replace(string(raw), meta.EventsHash, hex.EncodeToString(sum[:]), 1)
	fixed = strings.Replace(fixed, fmt.Sprintf(`"events": %d`, meta.Events), fmt.Sprintf(`"events": %d`, n), 1)
	fixed = strings.Replace(fixed, fmt.Sprintf(`"id": %q`, meta.ID), fmt.Sprintf(`"id": %q`, id), 1)
	if !strings.Contains(fixed, fmt.Sprintf(`"events": %d`, n)) || !strings.Contains(fixed, fmt.Sprintf(`"id": %q`, id)) {
		t.Fatalf("could not rewrite meta.json for the new log:\n%s", raw)
	}
	if err := os.WriteFile(filepath.Join(dst, "meta.json"), []byte(fixed), 0o644); err != nil {
		t.Fatal(err)
	}
	// Intact, that is; a log cut before session_end is incomplete on purpose.
	cmd := exec.CommandContext(t.Context(), agentrewindBin, "verify", dst)
	if out, err := cmd.CombinedOutput(); err != nil && !bytes.Contains(out, []byte("hashes intact")) {
		t.Fatalf("the rewritten session does not verify: %v\n%s", err, out)
	}
	return dst
}

// freeAddr is a loopback address with a port that was free a moment ago.
func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func waitHTTP(ctx context.Context, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("%s: %s", url, resp.Status)
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}
