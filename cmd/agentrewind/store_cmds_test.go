package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/spf13/cobra"

	"github.com/agentrewind/agentrewind/internal/blobstore"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/fsutil"
	"github.com/agentrewind/agentrewind/internal/testenv"
)

// fixtureVault stands in for the sealed vault: ciphertext, opaque to the store.
var fixtureVault = []byte("\x8f\x01sealed-aes-256-gcm\x00\xfe")

// storeFixture records a committed session with one blob and fixtureVault as its sealed vault.
func storeFixture(t *testing.T, id string) string {
	t.Helper()
	return recordStoreFixture(t, id, fixtureVault)
}

// recordStoreFixture records a committed session with one blob, and the sealed vault unless nil.
func recordStoreFixture(t *testing.T, id string, vault []byte) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), id)
	w, err := session.Create(dir, session.Meta{ID: id, CreatedAt: 1700000000000, FingerprintMode: "strict"}, session.WriterOptions{BlobThreshold: 64})
	if err != nil {
		t.Fatal(err)
	}
	big, _ := json.Marshal(strings.Repeat("result ", 100))
	for _, ev := range []session.Event{
		{Step: 0, Lane: "0", Kind: session.KindSessionStart},
		{Step: 1, Lane: "0", Kind: session.KindToolCall, Name: "fetch", Args: json.RawMessage(`{}`), Result: big},
		{Step: 2, Lane: "0", Kind: session.KindSessionEnd},
	} {
		if err := w.Append(ev); err != nil {
			t.Fatal(err)
		}
	}
	if vault != nil {
		if err := w.SetVault(vault); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Close(nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

// runStoreCommand runs a store command built by newCmd and returns its stdout and stderr.
func runStoreCommand(t *testing.T, newCmd func() *cobra.Command, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := newCmd()
	cmd.SetArgs(args)
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.ExecuteContext(context.Background())
	return stdout.String(), stderr.String(), err
}

// storeServer starts versitygw and points the environment the commands read at it.
func storeServer(t *testing.T) *testenv.S3Server {
	t.Helper()
	srv := testenv.StartS3Server(t)
	t.Setenv(blobstore.EnvEndpoint, "http://"+srv.Endpoint)
	t.Setenv(blobstore.EnvAccessKeyID, srv.AccessKey)
	t.Setenv(blobstore.EnvSecretAccessKey, srv.SecretKey)
	t.Setenv(blobstore.EnvSessionToken, "")
	t.Setenv(envStore, "")
	return srv
}

func TestStorePushLsPullRoundTrip(t *testing.T) {
	srv := storeServer(t)
	dir := storeFixture(t, "run-1")
	const store = "s3://cli-bucket/team"

	out, errOut, err := runStoreCommand(t, newPushCommand, dir, "--store", store, "--create-bucket")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "pushed session run-1 to s3://cli-bucket/team: 1 blobs (1 uploaded, 0 already stored)") ||
		!strings.Contains(out, "vault.enc uploaded sealed") || !strings.Contains(out, "its key was not") {
		t.Errorf("push output:\n%s", out)
	}
	if !strings.Contains(errOut, "push run-1: blobs") || !strings.Contains(errOut, "push run-1: vault") ||
		!regexp.MustCompile(`push run-1: done, (\d+)/\d+ objects`).MatchString(errOut) || strings.Contains(errOut, "\r") {
		t.Errorf("push progress on a non-terminal should be plain lines:\n%q", errOut)
	}
	client, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	obj, err := client.GetObject(context.Background(), "cli-bucket", "team/sessions/run-1/vault."+sha256Hex(fixtureVault)+".enc", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stored, err := io.ReadAll(obj)
	obj.Close()
	if err != nil || !bytes.Equal(stored, fixtureVault) {
		t.Fatalf("team/sessions/run-1/vault.enc holds %q (%v), want the sealed vault", stored, err)
	}

	out, _, err = runStoreCommand(t, newPushCommand, dir, "--store", store, "-o", "json")
	var pushed map[string]any
	if err != nil || json.Unmarshal([]byte(out), &pushed) != nil || pushed["alreadyCommitted"] != true || pushed["blobsSkipped"] != 1.0 ||
		pushed["hasVault"] != true || pushed["vaultUploaded"] != false || pushed["vaultSkipped"] != false {
		t.Errorf("second push -o json: %v\n%s", err, out)
	}
	if _, ok := pushed["vaultLeftOut"]; ok {
		t.Errorf("second push -o json still reports vaultLeftOut:\n%s", out)
	}

	out, _, err = runStoreCommand(t, newLsCommand, "--store", store)
	if err != nil || !strings.Contains(out, "SESSION") || !strings.Contains(out, "run-1") || !strings.Contains(out, "2023-11-14T22:13:20Z") {
		t.Errorf("ls: %v\n%s", err, out)
	}
	out, _, err = runStoreCommand(t, newLsCommand, "--store", store, "-o", "json")
	var rows []lsRow
	if err != nil || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 1 || rows[0].ID != "run-1" || rows[0].Events != 3 {
		t.Errorf("ls -o json: %v\n%s", err, out)
	}

	pulled := filepath.Join(t.TempDir(), "pulled")
	out, _, err = runStoreCommand(t, newPullCommand, "run-1", pulled, "--store", store)
	if err != nil || !strings.Contains(out, "pulled session run-1") || !strings.Contains(out, "verified") ||
		!strings.Contains(out, "vault.enc pulled sealed") {
		t.Fatalf("pull: %v\n%s", err, out)
	}
	if _, err := session.Open(pulled); err != nil {
		t.Fatalf("the pulled session does not open: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(pulled, session.VaultFile)); err != nil || !bytes.Equal(got, fixtureVault) {
		t.Errorf("the pulled vault is %q (%v), want the recorded sealed bytes", got, err)
	}
}

func TestStoreSessionWithoutAVaultSaysNothingOfOne(t *testing.T) {
	storeServer(t)
	dir := recordStoreFixture(t, "plain", nil)
	const store = "s3://cli-bucket"
	out, _, err := runStoreCommand(t, newPushCommand, dir, "--store", store, "--create-bucket", "-o", "json")
	var pushed map[string]any
	if err != nil || json.Unmarshal([]byte(out), &pushed) != nil || pushed["hasVault"] != false || pushed["vaultUploaded"] != false {
		t.Fatalf("push -o json of a session without a vault: %v\n%s", err, out)
	}
	pulled := filepath.Join(t.TempDir(), "pulled")
	out, _, err = runStoreCommand(t, newPullCommand, "plain", pulled, "--store", store)
	if err != nil || strings.Contains(out, "vault") {
		t.Fatalf("pull of a session without a vault: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(pulled, session.VaultFile)); !os.IsNotExist(err) {
		t.Errorf("the pulled session has a vault it never had: %v", err)
	}
}

func TestStorePushRefusesASessionMissingItsDeclaredVault(t *testing.T) {
	storeServer(t)
	dir := storeFixture(t, "run-1")
	if err := os.Remove(filepath.Join(dir, session.VaultFile)); err != nil {
		t.Fatal(err)
	}
	_, _, err := runStoreCommand(t, newPushCommand, dir, "--store", "s3://cli-bucket", "--create-bucket")
	if !errors.Is(err, blobstore.ErrVaultMissing) || !strings.Contains(err.Error(), "copy back the vault.enc") {
		t.Fatalf("push without the declared vault: %v, want ErrVaultMissing saying what to do", err)
	}
}

func TestStorePullOfATamperedSessionExitsAsCorrupt(t *testing.T) {
	srv := storeServer(t)
	dir := storeFixture(t, "run-1")
	const store = "s3://cli-bucket"
	if _, _, err := runStoreCommand(t, newPushCommand, dir, "--store", store, "--create-bucket"); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{storedSegments(t, srv, "run-1")[1], "sessions/run-1/vault." + sha256Hex(fixtureVault) + ".enc"} {
		path := srv.ObjectPath("cli-bucket", key)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		data[len(data)/2] ^= 0x01
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		pulled := filepath.Join(t.TempDir(), "pulled")
		_, _, err = runStoreCommand(t, newPullCommand, "run-1", pulled, "--store", store)
		if err == nil || exitCode(err) != exitCorrupt || !strings.Contains(err.Error(), "s3://cli-bucket/"+key) {
			t.Fatalf("pull with %s tampered: %v (exit %d), want exit %d naming the object", key, err, exitCode(err), exitCorrupt)
		}
		if _, err := os.Stat(pulled); !os.IsNotExist(err) {
			t.Errorf("a failed pull left %s", pulled)
		}
		data[len(data)/2] ^= 0x01 // restore it, so the next object's check is its own
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestStoreCommandErrorsSayWhatToDo(t *testing.T) {
	dir := storeFixture(t, "run-1")
	t.Setenv(envStore, "")
	t.Setenv(blobstore.EnvEndpoint, "")
	t.Setenv(blobstore.EnvAccessKeyID, "AKID")
	t.Setenv(blobstore.EnvSecretAccessKey, "super-secret-value")
	for _, tc := range []struct {
		name string
		cmd  func() *cobra.Command
		args []string
		want string
	}{
		{"push without --store", newPushCommand, []string{dir}, "--store s3://<bucket>/<prefix> or set AGENTREWIND_STORE"},
		{"ls with a bad store URL", newLsCommand, []string{"--store", "https://bucket/x"}, "s3://bucket/prefix"},
		{"pull without an endpoint", newPullCommand, []string{"run-1", t.TempDir(), "--store", "s3://bucket"}, "--endpoint"},
		{"ls with an unknown output", newLsCommand, []string{"--store", "s3://bucket", "-o", "yaml"}, "use text or json"},
	} {
		_, _, err := runStoreCommand(t, tc.cmd, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "super-secret-value") {
			t.Errorf("%s: the error shows the secret key: %v", tc.name, err)
		}
	}
	t.Setenv(blobstore.EnvSecretAccessKey, "")
	_, _, err := runStoreCommand(t, newLsCommand, "--store", "s3://bucket", "--endpoint", "http://127.0.0.1:1")
	if err == nil || !strings.Contains(err.Error(), "AWS_SECRET_ACCESS_KEY") {
		t.Errorf("ls without a secret key: %v, want an error naming AWS_SECRET_ACCESS_KEY", err)
	}
}

func TestStoreProgressDrawsABarOrPlainLines(t *testing.T) {
	steps := []blobstore.Progress{
		{Op: "push", Session: "s", Phase: blobstore.PhaseBlobs, TotalObjects: 12, TotalBytes: 1000},
	}
	for i := 1; i <= 10; i++ {
		steps = append(steps, blobstore.Progress{Op: "push", Session: "s", Phase: blobstore.PhaseBlobs, Object: "k",
			DoneObjects: i, TotalObjects: 12, DoneBytes: int64(i * 90), TotalBytes: 1000})
	}
	steps = append(steps, blobstore.Progress{Op: "push", Session: "s", Phase: blobstore.PhaseDone, DoneObjects: 12, TotalObjects: 12, DoneBytes: 1000, TotalBytes: 1000})

	var plain bytes.Buffer
	p := newStoreProgress(&plain)
	for _, s := range steps {
		p.update(s)
	}
	p.finish()
	lines := strings.Split(strings.TrimSpace(plain.String()), "\n")
	if len(lines) < 5 || len(lines) > 12 || lines[len(lines)-1] != "push s: done, 12/12 objects, 1000 B/1000 B" || strings.Contains(plain.String(), "\r") {
		t.Errorf("plain progress:\n%s", plain.String())
	}

	var bar bytes.Buffer
	p = &storeProgress{w: &bar, bar: true, lastTenth: -1}
	for _, s := range steps {
		p.update(s)
	}
	p.finish()
	if !strings.Contains(bar.String(), "\r\033[K") || !strings.Contains(bar.String(), "[##############################] 100%") || !strings.HasSuffix(bar.String(), "\n") {
		t.Errorf("bar progress: %q", bar.String())
	}
}

// urlSecret is a generated secret over the base64 alphabet plus the characters that end or escape
// a URL's parts, each appearing, so no delimiter rule can mistake where it ends.
func urlSecret(seed int) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=#?@:%"
	var b strings.Builder
	for i := range 40 + seed%7 {
		b.WriteByte(alphabet[(i*31+seed*17+i*i*7)%len(alphabet)])
	}
	b.WriteString("/#?@:%zz") // every special character, and a bad escape
	return "S3cr" + b.String()
}

// secretRuns are the pieces of a secret an error could echo: its runs of letters and digits.
func secretRuns(secret string) []string {
	var runs []string
	for _, r := range strings.FieldsFunc(secret, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9')
	}) {
		if len(r) >= 5 {
			runs = append(runs, r)
		}
	}
	return runs
}

func TestStoreErrorsNeverEchoURLCredentialsOrQueries(t *testing.T) {
	dir := storeFixture(t, "run-1")
	t.Setenv(blobstore.EnvAccessKeyID, "AKIDENV")
	t.Setenv(blobstore.EnvSecretAccessKey, "env-secret")
	for seed := range 12 {
		secret := urlSecret(seed)
		const user = "AKIAUSERINFOKEY"
		endpoints := []string{
			"https://" + user + ":" + secret + "@s3.example.com:9000",
			user + ":" + secret + "@s3.example.com",
			"ftp://" + user + ":" + secret + "@s3.example.com",
			"https://s3.example.com:9000/?X-Amz-Credential=" + user + "&X-Amz-Signature=" + secret,
			"https://s3.example.com:bad?X-Amz-Signature=" + secret,
			"https://s3.example.com#" + secret,
		}
		stores := []string{
			"s3://" + user + ":" + secret + "@bucket/prefix",
			"s4://" + user + ":" + secret + "@bucket",
			"s3://bucket/prefix?token=" + secret,
			"s3://Bad_Bucket/p#" + secret,
		}
		check := func(what string, outs ...string) {
			t.Helper()
			all := strings.Join(outs, "\n")
			for _, s := range append(secretRuns(secret), user) {
				if strings.Contains(all, s) {
					t.Errorf("%s echoes %q of the secret %q:\n%s", what, s, secret, all)
				}
			}
		}
		for _, ep := range endpoints {
			for _, viaEnv := range []bool{false, true} {
				args := []string{"--store", "s3://bucket"}
				t.Setenv(blobstore.EnvEndpoint, "")
				if viaEnv {
					t.Setenv(blobstore.EnvEndpoint, ep)
				} else {
					args = append(args, "--endpoint", ep)
				}
				for _, c := range []struct {
					cmd  func() *cobra.Command
					args []string
				}{{newLsCommand, nil}, {newPushCommand, []string{dir}}, {newPullCommand, []string{"run-1", filepath.Join(t.TempDir(), "o")}}} {
					out, errOut, err := runStoreCommand(t, c.cmd, append(c.args, args...)...)
					if err == nil {
						t.Fatalf("endpoint %q was accepted", ep)
					}
					check("endpoint "+ep, err.Error(), out, errOut)
				}
			}
		}
		t.Setenv(blobstore.EnvEndpoint, "https://s3.example.com")
		for _, st := range stores {
			for _, viaEnv := range []bool{false, true} {
				var args []string
				t.Setenv(envStore, "")
				if viaEnv {
					t.Setenv(envStore, st)
				} else {
					args = []string{"--store", st}
				}
				out, errOut, err := runStoreCommand(t, newLsCommand, args...)
				if err == nil {
					t.Fatalf("store %q was accepted", st)
				}
				check("store "+st, err.Error(), out, errOut)
			}
		}
		// --help prints flag defaults: an endpoint or store from the environment must not show.
		t.Setenv(blobstore.EnvEndpoint, endpoints[0])
		t.Setenv(envStore, stores[0])
		out, errOut, _ := runStoreCommand(t, newPullCommand, "--help")
		check("pull --help", out, errOut)
		t.Setenv(envStore, "")
	}

	// URLs without an "@" that do not parse, or parse with the secret outside scheme://host[:port]:
	// the error says the URL is wrong without repeating any of it.
	const secret = "hunter2Zq9wJalrXUtnFEMI"
	t.Setenv(blobstore.EnvEndpoint, "")
	for _, ep := range []string{"http://u:" + secret, "http://127.0.0.1:1/%zz" + secret, "http://127.0.0.1:1/X-Amz-Signature=" + secret,
		"http://h:1;X-Amz-Signature=" + secret} {
		out, errOut, err := runStoreCommand(t, newLsCommand, "--store", "s3://bucket", "--endpoint", ep)
		if err == nil || strings.Contains(err.Error()+out+errOut, secret) || strings.Contains(err.Error()+out+errOut, "hunter2") {
			t.Errorf("endpoint %q: %v\n%s%s", ep, err, out, errOut)
		}
	}
	for _, st := range []string{"s3://u:" + secret, "s3://bkt:" + secret + "/team", "s3://bkt/te%zz" + secret} {
		out, errOut, err := runStoreCommand(t, newLsCommand, "--store", st, "--endpoint", "https://s3.example.com")
		if err == nil || strings.Contains(err.Error()+out+errOut, "hunter2") {
			t.Errorf("store %q: %v\n%s%s", st, err, out, errOut)
		}
	}
}

func TestStoreSilentEndpointFailsWithinTheStatedTime(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() { // accept, and never answer
		var held []net.Conn
		for {
			c, err := l.Accept()
			if err != nil {
				for _, c := range held {
					c.Close()
				}
				return
			}
			held = append(held, c)
		}
	}()
	t.Setenv(blobstore.EnvAccessKeyID, "AK")
	t.Setenv(blobstore.EnvSecretAccessKey, "SK")
	t.Setenv(envStore, "")
	stated := blobstore.Config{RequestTimeout: 200 * time.Millisecond}.NoAnswerBudget()
	start := time.Now()
	_, _, err = runStoreCommand(t, newLsCommand, "--store", "s3://bucket", "--endpoint", "http://"+l.Addr().String(), "--request-timeout", "200ms")
	// The attempts are counted exactly below; the clock only has to tell a command that waits 200ms
	// per attempt from one that ignores --request-timeout and waits the default 30s, so it gets 2s of
	// slack for the scheduling jitter of a loaded machine.
	if elapsed := time.Since(start); err == nil || elapsed > stated+2*time.Second {
		t.Fatalf("ls against a silent endpoint: %v after %s, want a failure within the stated %s", err, elapsed, stated)
	}
	if !strings.Contains(err.Error(), "gave up after 5 attempts") || !strings.Contains(err.Error(), "no complete answer within 200ms") {
		t.Errorf("the error does not say what happened: %v", err)
	}

	// The help states the same budget, for the default timeout.
	out, _, _ := runStoreCommand(t, newLsCommand, "--help")
	def := blobstore.Config{RequestTimeout: defaultRequestTimeout}.NoAnswerBudget()
	if !strings.Contains(out, "5 attempts") || !strings.Contains(out, def.String()) || !strings.Contains(out, "--timeout") {
		t.Errorf("ls --help does not state the retries and the %s they take:\n%s", def, out)
	}

	// --timeout bounds the command as a whole, however patient each request is.
	start = time.Now()
	_, _, err = runStoreCommand(t, newLsCommand, "--store", "s3://bucket", "--endpoint", "http://"+l.Addr().String(), "--timeout", "300ms")
	if elapsed := time.Since(start); err == nil || elapsed > 2*time.Second || !strings.Contains(err.Error(), "did not finish within --timeout 300ms") {
		t.Fatalf("ls with --timeout 300ms against a silent endpoint: %v after %s", err, elapsed)
	}
}

func TestStoreMinThroughputTakesARate(t *testing.T) {
	for in, want := range map[string]int64{"1MiB": 1 << 20, "256KiB": 256 << 10, "1MB/s": 1e6, "1048576": 1 << 20, "1.5KiB": 1536} {
		var r byteRate
		if err := r.Set(in); err != nil || int64(r) != want {
			t.Errorf("--min-throughput %s = %d, %v; want %d", in, r, err, want)
		}
	}
	for _, in := range []string{"", "0", "-1MiB", "fast", "1XB"} {
		var r byteRate
		if err := r.Set(in); err == nil {
			t.Errorf("--min-throughput %q was accepted as %d", in, r)
		}
	}
}

func TestStoreAdviceNamesTheFlagForATooSlowTransfer(t *testing.T) {
	err := storeAdvice(fmt.Errorf("pull x: %w", &blobstore.TooSlowError{Bytes: 10, Elapsed: time.Second, Min: 1 << 20}))
	if !errors.Is(err, blobstore.ErrTooSlow) || !strings.Contains(err.Error(), "lower --min-throughput") {
		t.Fatalf("advice for a too slow transfer: %v", err)
	}
	if other := errors.New("x"); storeAdvice(other) != other {
		t.Fatal("advice added to an unrelated error")
	}
}

// rewriteCommitted rewrites a committed session's events.jsonl with edit and meta.json to match
// (its eventsHash and event count), as someone who knows the format would: every hash holds, and
// only agentrewind verify's structural checks can tell.
func rewriteCommitted(t *testing.T, events, meta []byte, edit func([]byte) []byte, count func(int64) int64) (newEvents, newMeta []byte) {
	t.Helper()
	m, err := session.DecodeMeta(meta, "meta.json")
	if err != nil {
		t.Fatal(err)
	}
	newEvents = edit(events)
	sum := sha256.Sum256(newEvents)
	newMeta = bytes.Replace(meta, []byte(m.EventsHash), []byte(hex.EncodeToString(sum[:])), 1)
	for _, end := range []string{",", "\n"} { // the count is followed by another key, or ends the object
		oldCount, newCount := fmt.Sprintf(`"events": %d`+end, m.Events), fmt.Sprintf(`"events": %d`+end, count(m.Events))
		if bytes.Contains(newMeta, []byte(oldCount)) {
			return newEvents, bytes.Replace(newMeta, []byte(oldCount), []byte(newCount), 1)
		}
	}
	t.Fatalf("meta.json has no event count:\n%s", meta)
	return nil, nil
}

// TestStoreSessionsVerifyRejectsNeitherEnterNorLeaveTheStore: push of a session whose log has a
// second session_end exits 2 and stores nothing; a stored session whose meta.json counts an event
// more than its log, rewritten at rest with its hashes recomputed, is not pulled (exit 2, nothing
// written), as a meta.json with an unknown key (its record matching) and a missing events.jsonl are
// not either.
func TestStoreSessionsVerifyRejectsNeitherEnterNorLeaveTheStore(t *testing.T) {
	srv := storeServer(t)
	const store = "s3://cli-bucket"
	bad := recordStoreFixture(t, "bad", nil)
	events, meta := mustRead(t, filepath.Join(bad, session.EventsFile)), mustRead(t, filepath.Join(bad, session.MetaFile))
	events, meta = rewriteCommitted(t, events, meta, func(ev []byte) []byte {
		lines := bytes.SplitAfter(ev, []byte("\n"))
		return append(bytes.Clone(ev), lines[len(lines)-2]...) // the session_end line again
	}, func(n int64) int64 { return n + 1 })
	mustWriteFile(t, filepath.Join(bad, session.EventsFile), events)
	mustWriteFile(t, filepath.Join(bad, session.MetaFile), meta)
	if _, _, err := runStoreCommand(t, newPushCommand, bad, "--store", store, "--create-bucket"); exitCode(err) != exitCorrupt {
		t.Fatalf("push of a session with two session_end lines: exit %d (%v), want %d", exitCode(err), err, exitCorrupt)
	}
	if out, _, err := runStoreCommand(t, newLsCommand, "--store", store); err != nil || !strings.Contains(out, "no committed sessions") {
		t.Fatalf("ls after a refused push: %v\n%s", err, out)
	}

	// writeSum stores the record that vouches for meta, as a forger with write access would.
	writeSum := func(id string, meta []byte) {
		client, err := srv.Client()
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(meta)
		rec := metaSum(meta)
		key := "sessions/" + id + "/meta.json." + hex.EncodeToString(sum[:]) + ".sha256"
		if _, err := client.PutObject(context.Background(), "cli-bucket", key, bytes.NewReader(rec), int64(len(rec)), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	damage := map[string]func(id, metaPath string){
		"meta.json counting an event more than the log holds": func(id, metaPath string) {
			var log []byte
			for _, seg := range storedSegments(t, srv, id) {
				log = append(log, mustRead(t, srv.ObjectPath("cli-bucket", seg))...)
			}
			_, meta := rewriteCommitted(t, log, mustRead(t, metaPath), func(ev []byte) []byte { return ev },
				func(n int64) int64 { return n + 1 })
			mustWriteFile(t, metaPath, meta)
			writeSum(id, meta)
		},
		"meta.json with a key in another case": func(id, metaPath string) {
			meta := bytes.Replace(mustRead(t, metaPath), []byte(`"createdAt"`), []byte(`"CreatedAt"`), 1)
			mustWriteFile(t, metaPath, meta)
			writeSum(id, meta)
		},
		"the log's index missing": func(id, _ string) {
			if err := os.Remove(srv.ObjectPath("cli-bucket", storedIndex(t, srv, id))); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, spoil := range damage {
		t.Run(name, func(t *testing.T) {
			id := "run-" + strconv.Itoa(len(name))
			if _, _, err := runStoreCommand(t, newPushCommand, recordStoreFixture(t, id, nil), "--store", store); err != nil {
				t.Fatal(err)
			}
			key := func(f string) string { return srv.ObjectPath("cli-bucket", "sessions/"+id+"/"+f) }
			spoil(id, key(session.MetaFile))
			parent := t.TempDir()
			_, _, err := runStoreCommand(t, newPullCommand, id, filepath.Join(parent, "out"), "--store", store)
			if exitCode(err) != exitCorrupt {
				t.Fatalf("pull: exit %d (%v), want %d", exitCode(err), err, exitCorrupt)
			}
			if entries, _ := os.ReadDir(parent); len(entries) != 0 {
				t.Fatalf("a refused pull left %v", entries)
			}
		})
	}
}

// storedSegments are the keys of the segments session id's log is stored as in cli-bucket without a
// prefix, in log order (its segments.json).
func storedSegments(t *testing.T, srv *testenv.S3Server, id string) []string {
	t.Helper()
	var idx struct {
		Segments []struct {
			Hash string `json:"sha256"`
		} `json:"segments"`
	}
	if err := json.Unmarshal(mustRead(t, srv.ObjectPath("cli-bucket", storedIndex(t, srv, id))), &idx); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, seg := range idx.Segments {
		keys = append(keys, "blobs/sha256/"+seg.Hash[:2]+"/"+seg.Hash)
	}
	return keys
}

// storedIndex is the key of session id's segment index, named by its log's hash.
func storedIndex(t *testing.T, srv *testenv.S3Server, id string) string {
	t.Helper()
	var m struct {
		EventsHash string `json:"eventsHash"`
	}
	if err := json.Unmarshal(mustRead(t, srv.ObjectPath("cli-bucket", "sessions/"+id+"/meta.json")), &m); err != nil {
		t.Fatal(err)
	}
	return "sessions/" + id + "/segments." + m.EventsHash + ".json"
}

func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func metaSum(meta []byte) []byte {
	sum := sha256.Sum256(meta)
	return []byte(hex.EncodeToString(sum[:]) + "  " + session.MetaFile + "\n")
}

// TestUnpackAndPackRefuseOutputsThatAreNotWhatTheySeem: unpack into a file or a symbolic link exits
// 1 (the destination, not the bundle, is wrong) and changes nothing; pack over a symbolic or hard
// link to one of the session's files, or over a directory, is refused and changes nothing.
func TestUnpackAndPackRefuseOutputsThatAreNotWhatTheySeem(t *testing.T) {
	dir := recordStoreFixture(t, "b", nil)
	work := t.TempDir()
	bundlePath := filepath.Join(work, "b.rewind")
	if _, _, err := runStoreCommand(t, newPackCommand, dir, bundlePath); err != nil {
		t.Fatal(err)
	}
	orig := mustRead(t, bundlePath)
	if _, _, err := runStoreCommand(t, newUnpackCommand, bundlePath, bundlePath); exitCode(err) != exitError ||
		!strings.Contains(err.Error(), "not a directory") || !bytes.Equal(mustRead(t, bundlePath), orig) {
		t.Fatalf("unpack into the bundle itself: exit %d (%v)", exitCode(err), err)
	}
	empty := t.TempDir()
	link := filepath.Join(work, "link")
	if err := os.Symlink(empty, link); err != nil {
		t.Skipf("cannot create symlinks here: %v", err)
	}
	if _, _, err := runStoreCommand(t, newUnpackCommand, bundlePath, link); exitCode(err) != exitError || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("unpack into a symbolic link: exit %d (%v)", exitCode(err), err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link was replaced: %v", err)
	}

	eventsPath := filepath.Join(dir, session.EventsFile)
	events := mustRead(t, eventsPath)
	symOut, hardOut := filepath.Join(work, "sym.rewind"), filepath.Join(work, "hard.rewind")
	if err := os.Symlink(eventsPath, symOut); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(eventsPath, hardOut); err != nil {
		t.Skipf("cannot create hard links here: %v", err)
	}
	for _, out := range []string{symOut, hardOut} {
		_, _, err := runStoreCommand(t, newPackCommand, dir, out)
		if _, ok := errors.AsType[*fsutil.OutputInsideInputError](err); !ok {
			t.Errorf("pack over %s, a link to events.jsonl: %v", out, err)
		}
	}
	if fi, err := os.Lstat(symOut); err != nil || fi.Mode()&os.ModeSymlink == 0 || !bytes.Equal(mustRead(t, eventsPath), events) {
		t.Fatalf("pack changed the link or the session: %v", err)
	}
	if _, _, err := runStoreCommand(t, newPackCommand, dir, empty); err == nil || !strings.Contains(err.Error(), "the output is a directory: give a file name") {
		t.Fatalf("pack over a directory: %v", err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func mustWriteFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// verify checks the sealed vault against the vaultHash meta.json declares, as push does: one
// altered or missing is a corrupt session (exit 2), named in the message.
func TestVerifyChecksTheSealedVault(t *testing.T) {
	dir := recordStoreFixture(t, "vaulted", fixtureVault)
	meta, err := session.ReadMeta(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := session.CheckVault(dir, meta); err != nil {
		t.Fatalf("the intact vault does not check: %v", err)
	}
	vault := filepath.Join(dir, session.VaultFile)
	if err := os.WriteFile(vault, append([]byte("x"), fixtureVault...), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = runCLI(t, "verify", dir)
	if exitCode(err) != exitCorrupt || !strings.Contains(err.Error(), "vault.enc is corrupt or was tampered with") {
		t.Fatalf("verify of an altered vault: exit %d, %v", exitCode(err), err)
	}
	if err := os.Remove(vault); err != nil {
		t.Fatal(err)
	}
	_, err = runCLI(t, "verify", dir)
	if exitCode(err) != exitCorrupt || !strings.Contains(err.Error(), "vault") {
		t.Fatalf("verify of a missing vault: exit %d, %v", exitCode(err), err)
	}
}
