package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/agentrewind/agentrewind/internal/blobstore"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// envStore names the default --store.
const envStore = "AGENTREWIND_STORE"

// Defaults of the flags that bound a store command's time.
const (
	defaultMinThroughput  = 1 << 20 // bytes per second, shared by the parallel transfers
	defaultRequestTimeout = 30 * time.Second
	defaultTimeout        = time.Hour
)

// storeFlags are the flags every store command shares.
type storeFlags struct {
	store, endpoint, region, caFile string
	insecure, createBucket          bool
	verifyStored                    bool
	parallel                        int
	requestTimeout, timeout         time.Duration
	minThroughput                   byteRate
	output                          string
}

func (f *storeFlags) register(cmd *cobra.Command, transfers bool) {
	fl := cmd.Flags()
	// The defaults come from the environment in open, not here: cobra prints a flag's default in
	// --help and in usage errors, and an endpoint or store URL may carry what must not be shown.
	fl.StringVar(&f.store, "store", "", "where sessions are stored: s3://<bucket>/<prefix> (default $"+envStore+")")
	fl.StringVar(&f.endpoint, "endpoint", "", "S3 endpoint: https://host[:port], or http:// for a loopback or in-cluster server (default $"+blobstore.EnvEndpoint+")")
	fl.StringVar(&f.region, "region", "", "the bucket's region (default us-east-1)")
	fl.StringVar(&f.caFile, "ca-file", "", "PEM bundle of a private CA that signed the endpoint's certificate")
	fl.BoolVar(&f.insecure, "insecure-skip-tls-verify", false, "accept any server certificate (testing only: anyone on the path can read and change what is stored)")
	if transfers {
		fl.IntVar(&f.parallel, "parallel", 8, "objects transferred at once")
	}
	budget := blobstore.Config{RequestTimeout: defaultRequestTimeout}.NoAnswerBudget()
	retries := blobstore.RetryPolicy{}.Attempts()
	fl.DurationVar(&f.requestTimeout, "request-timeout", defaultRequestTimeout, fmt.Sprintf(
		"how long one attempt of a request may wait for the server's answer, or a download for its next byte; an upload attempt also gets "+
			"one second per --min-throughput of its size. A failed attempt is retried, %d attempts in all with backoff, so an endpoint "+
			"that does not answer fails the command after at most %d × this + %s (%s at the default)",
		retries, retries, budget-time.Duration(retries)*defaultRequestTimeout, budget))
	fl.DurationVar(&f.timeout, "timeout", defaultTimeout, "the longest the whole command may take, whatever it is waiting for")
	f.minThroughput = defaultMinThroughput
	fl.Var(&f.minThroughput, "min-throughput",
		"the slowest transfer rate tolerated, shared by the parallel transfers (e.g. 1MiB, 256KiB): a download that averages less, "+
			"counting its resumed attempts, is abandoned once the time a silent endpoint gets (see --request-timeout) is over")
	outputFlag(cmd, &f.output)
}

// context bounds a command by --timeout.
func (f *storeFlags) context(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(parent, f.timeout,
		fmt.Errorf("%w: the command did not finish within --timeout %s: raise it for a larger session or a slower link", context.DeadlineExceeded, f.timeout))
}

// open builds the session store the flags describe. Credentials come from AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN; they are never taken from flags, which leak into
// shell history and process listings.
func (f *storeFlags) open(ctx context.Context, progress func(blobstore.Progress)) (*blobstore.SessionStore, blobstore.StoreURL, error) {
	if err := checkOutput(f.output); err != nil {
		return nil, blobstore.StoreURL{}, err
	}
	if f.store == "" {
		f.store = os.Getenv(envStore)
	}
	if f.endpoint == "" {
		f.endpoint = os.Getenv(blobstore.EnvEndpoint)
	}
	if f.store == "" {
		return nil, blobstore.StoreURL{}, fmt.Errorf("--store is required: pass --store s3://<bucket>/<prefix> or set %s", envStore)
	}
	if f.timeout <= 0 || f.requestTimeout <= 0 {
		return nil, blobstore.StoreURL{}, errors.New("--timeout and --request-timeout must be positive")
	}
	loc, err := blobstore.ParseStoreURL(f.store)
	if err != nil {
		return nil, loc, err
	}
	creds, err := blobstore.CredentialsFromEnv(os.LookupEnv)
	if err != nil {
		return nil, loc, err
	}
	cfg := blobstore.Config{Endpoint: f.endpoint, Region: f.region, Bucket: loc.Bucket, Prefix: loc.Prefix,
		TLS: blobstore.TLSConfig{CAFile: f.caFile, InsecureSkipVerify: f.insecure}, Credentials: creds, CreateBucket: f.createBucket,
		RequestTimeout: f.requestTimeout, MinThroughput: int64(f.minThroughput)}
	if f.parallel > 1 {
		// Parallel transfers share the link: each is held to its share of the slowest throughput
		// tolerated, or a slow uplink would time every large upload out.
		cfg.MinThroughput = max(int64(f.minThroughput)/int64(f.parallel), 1)
	}
	objects, err := blobstore.Open(ctx, cfg)
	if err != nil {
		return nil, loc, err
	}
	layout, err := blobstore.NewLayout(loc.Prefix)
	if err != nil {
		return nil, loc, err
	}
	return blobstore.NewSessionStore(objects, layout, blobstore.StoreOptions{Parallelism: f.parallel, Progress: progress,
		VerifyStored: f.verifyStored}), loc, nil
}

// storeAdvice adds what to do about the failures of a store command that a flag can fix.
func storeAdvice(err error) error {
	if errors.Is(err, blobstore.ErrTooSlow) {
		return fmt.Errorf("%w: if the link is that slow, lower --min-throughput", err)
	}
	return err
}

// byteRate is a --min-throughput value: bytes per second, written 1048576, 1MiB, 256KiB or 1MB.
type byteRate int64

var byteUnits = []struct {
	suffix string
	factor int64
}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"kB", 1e3}, {"B", 1}, {"", 1}}

func (r *byteRate) String() string { return storeBytes(int64(*r)) + "/s" }

func (r *byteRate) Type() string { return "rate" }

func (r *byteRate) Set(s string) error {
	v := strings.TrimSuffix(strings.TrimSpace(s), "/s")
	for _, u := range byteUnits {
		num, ok := strings.CutSuffix(v, u.suffix)
		if !ok {
			continue
		}
		n, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
		if err != nil || n <= 0 || n*float64(u.factor) > 1<<50 {
			break
		}
		*r = byteRate(max(int64(n*float64(u.factor)), 1))
		return nil
	}
	return fmt.Errorf("%q is not a positive rate: write it like 1MiB, 256KiB or 1048576 (bytes per second)", s)
}

// storeTimeHelp says which time limits hold, in every store command's help.
var storeTimeHelp = fmt.Sprintf(`Time limits: each request attempt waits at most --request-timeout (%s) for an answer, and a
download at most that long for its next byte; a failed attempt is retried, %d attempts in all with
backoff, so an endpoint that does not answer fails the command within %[3]s. A download that
averages less than --min-throughput (1 MiB/s, shared by the parallel transfers) once those %[3]s
are over is abandoned, however many times it resumed; an upload attempt that takes longer than
--request-timeout plus one second per --min-throughput of its size is retried. The whole command
stops at --timeout (%[4]s).`, defaultRequestTimeout, blobstore.RetryPolicy{}.Attempts(),
	blobstore.Config{RequestTimeout: defaultRequestTimeout}.NoAnswerBudget(), defaultTimeout)

func newPushCommand() *cobra.Command {
	var f storeFlags
	cmd := &cobra.Command{
		Use:   "push <session-dir> --store s3://<bucket>/<prefix>",
		Short: "Upload a recorded session to S3-compatible storage (its vault sealed, never its key)",
		Long: `Upload a committed session: the blobs the store does not have yet, then events.jsonl, then
vault.enc, then meta.json, which makes the session visible. Blobs are shared by hash, so a fork
uploads only its tail.

vault.enc holds the secrets redaction took out of the session. It is uploaded sealed (AES-256-GCM)
so that forks and replays in the cluster can restore them; its key is never uploaded: it stays in
the Kubernetes Secret or the local 0600 key file. The vault must match the vaultHash of meta.json,
or nothing is pushed; a vault.enc that meta.json does not declare stays on this machine.

An interrupted push leaves nothing visible; run it again to finish it. Credentials come from
AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN.

` + storeTimeHelp,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := f.context(cmd.Context())
			defer cancel()
			progress := newStoreProgress(cmd.ErrOrStderr())
			store, loc, err := f.open(ctx, progress.update)
			if err != nil {
				return err
			}
			res, err := store.Push(ctx, args[0])
			progress.finish()
			if err != nil {
				return classify(storeAdvice(fmt.Errorf("push %s to %s: %w", args[0], loc, err)))
			}
			return printPush(cmd.OutOrStdout(), f.output, loc, res)
		},
	}
	f.register(cmd, true)
	cmd.Flags().BoolVar(&f.createBucket, "create-bucket", false, "create the bucket if it does not exist")
	cmd.Flags().BoolVar(&f.verifyStored, "verify-stored", false,
		"read back and hash every object already in the store and upload it again if damaged (repairs a store a pull reported corrupt)")
	return cmd
}

func printPush(w io.Writer, output string, loc blobstore.StoreURL, res *blobstore.PushResult) error {
	if output == "json" {
		out := map[string]any{"session": res.ID, "store": loc.String(), "blobs": res.Blobs,
			"blobsUploaded": res.BlobsUploaded, "blobsSkipped": res.BlobsSkipped, "bytesUploaded": res.BytesUploaded,
			"bytesSkipped": res.BytesSkipped, "bytesSent": res.BytesSent, "eventsUploaded": res.EventsUploaded, "alreadyCommitted": res.AlreadyCommitted,
			"hasVault": res.HasVault, "vaultUploaded": res.VaultUploaded, "vaultSkipped": res.VaultSkipped}
		if res.VaultSkipped {
			out["vaultSkipReason"] = res.VaultSkipReason
		}
		return writeJSON(w, out)
	}
	if res.BytesSent == 0 {
		fmt.Fprintf(w, "session %s is already in %s: nothing to upload\n", res.ID, loc)
	} else {
		fmt.Fprintf(w, "pushed session %s to %s: %d blobs (%d uploaded, %d already stored), %s sent\n",
			res.ID, loc, res.Blobs, res.BlobsUploaded, res.BlobsSkipped, storeBytes(res.BytesSent))
	}
	if line := pushVaultLine(res); line != "" {
		fmt.Fprintln(w, line)
	}
	return nil
}

// pushVaultLine says what became of vault.enc, and that its key was not sent: whoever reads the
// output should not have to wonder whether secrets left the machine in the clear.
func pushVaultLine(res *blobstore.PushResult) string {
	switch {
	case res.VaultUploaded:
		return "vault.enc uploaded sealed (AES-256-GCM); its key was not: it stays in the Kubernetes Secret or local key file"
	case res.HasVault:
		return "vault.enc was already stored, sealed; its key never is"
	case res.VaultSkipped:
		return "vault.enc was not uploaded: " + res.VaultSkipReason
	}
	return ""
}

func newPullCommand() *cobra.Command {
	var f storeFlags
	cmd := &cobra.Command{
		Use:   "pull <session-id> <dir> --store s3://<bucket>/<prefix>",
		Short: "Download a session from S3-compatible storage into a new directory, verified",
		Long: `Download a committed session into a new or empty directory, verifying events.jsonl against the
eventsHash of meta.json, every blob against its hash, and vault.enc, when the session has one,
against its vaultHash. Nothing is left in <dir> if any check fails.

meta.json itself is checked against meta.json.sha256, stored beside it, and must hold exactly the
keys this agentrewind knows. An object that does not match its hash is fetched again, three reads
in all, before the pull fails: damage on the way goes away, damage in the store does not.

The session is assembled in a temporary directory .<dir>.pull-* beside <dir> and renamed into
place. The temporary directories of pulls into the same <dir> that were killed (their process is
gone, or they are a day old) are removed.

vault.enc arrives sealed, as it was stored: its key is never in the store. Replaying or forking
the session unseals it with the key from the Kubernetes Secret or the local key file.

` + storeTimeHelp,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := f.context(cmd.Context())
			defer cancel()
			progress := newStoreProgress(cmd.ErrOrStderr())
			store, loc, err := f.open(ctx, progress.update)
			if err != nil {
				return err
			}
			res, err := store.Pull(ctx, args[0], args[1])
			progress.finish()
			if err != nil {
				var dm *session.DigestMismatchError
				if errors.As(err, &dm) {
					err = fmt.Errorf("%w\nnothing was written; to repair the store, push an intact copy of the session with --verify-stored", err)
				}
				return classify(storeAdvice(fmt.Errorf("pull %s from %s: %w", args[0], loc, err)))
			}
			for _, tmp := range res.RemovedStale {
				fmt.Fprintf(cmd.ErrOrStderr(), "removed %s, left by a pull into %s that did not finish\n", tmp, res.Dir)
			}
			if f.output == "json" {
				return writeJSON(cmd.OutOrStdout(), map[string]any{"session": res.ID, "store": loc.String(), "dir": res.Dir,
					"events": res.Events, "blobs": res.Blobs, "bytes": res.Bytes, "eventsHash": res.Meta.EventsHash,
					"vault": res.Vault})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "pulled session %s from %s into %s: %d events, %d blobs, %s, verified\n",
				res.ID, loc, res.Dir, res.Events, res.Blobs, storeBytes(res.Bytes))
			if res.Vault {
				fmt.Fprintln(cmd.OutOrStdout(), "vault.enc pulled sealed and verified; unsealing it needs its key, which the store never holds")
			}
			return nil
		},
	}
	f.register(cmd, true)
	return cmd
}

func newLsCommand() *cobra.Command {
	var f storeFlags
	cmd := &cobra.Command{
		Use:   "ls --store s3://<bucket>/<prefix>",
		Short: "List the committed sessions in S3-compatible storage",
		Long: `List the committed sessions in the store, oldest first. Uploads that were interrupted before
meta.json are not sessions yet and are not listed; a session whose meta.json cannot be read is
listed with the problem.

` + storeTimeHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := f.context(cmd.Context())
			defer cancel()
			store, loc, err := f.open(ctx, nil)
			if err != nil {
				return err
			}
			list, err := store.List(ctx)
			if err != nil {
				return storeAdvice(fmt.Errorf("listing %s: %w", loc, err))
			}
			if f.output == "json" {
				return writeJSON(cmd.OutOrStdout(), lsRows(list))
			}
			return printLs(cmd.OutOrStdout(), loc, list)
		},
	}
	f.register(cmd, false)
	return cmd
}

// lsRow is a listed session as ls -o json prints it.
type lsRow struct {
	ID           string `json:"id"`
	Parent       string `json:"parent,omitempty"`
	ForkedAtStep *int64 `json:"forkedAtStep,omitempty"`
	Events       int64  `json:"events"`
	CreatedAt    string `json:"createdAt,omitempty"`
	CommittedAt  string `json:"committedAt"`
	EventsHash   string `json:"eventsHash,omitempty"`
	Problem      string `json:"problem,omitempty"`
}

func lsRows(list []blobstore.SessionInfo) []lsRow {
	rows := make([]lsRow, 0, len(list))
	for _, s := range list {
		r := lsRow{ID: s.ID, Parent: s.Meta.Parent, ForkedAtStep: s.Meta.ForkedAtStep, Events: s.Meta.Events,
			CommittedAt: s.CommittedAt.UTC().Format(time.RFC3339), EventsHash: s.Meta.EventsHash, Problem: s.Problem}
		if s.Meta.CreatedAt > 0 {
			r.CreatedAt = time.UnixMilli(s.Meta.CreatedAt).UTC().Format(time.RFC3339)
		}
		rows = append(rows, r)
	}
	return rows
}

func printLs(w io.Writer, loc blobstore.StoreURL, list []blobstore.SessionInfo) error {
	if len(list) == 0 {
		_, err := fmt.Fprintf(w, "no committed sessions in %s\n", loc)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tPARENT\tEVENTS\tCREATED\tCOMMITTED\tPROBLEM")
	for _, r := range lsRows(list) {
		parent := r.Parent
		if r.ForkedAtStep != nil {
			parent = fmt.Sprintf("%s@%d", parent, *r.ForkedAtStep)
		}
		// Everything but the counts comes from a meta.json someone else may have written.
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", printableCell(r.ID), printableCell(storeDash(parent)), r.Events,
			printableCell(storeDash(r.CreatedAt)), printableCell(r.CommittedAt), printableCell(storeDash(r.Problem)))
	}
	return tw.Flush()
}

func storeDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// storeProgress shows a transfer on stderr: a redrawn bar on a terminal, else a line per phase and
// per tenth of the way, so logs stay readable.
type storeProgress struct {
	w         io.Writer
	bar       bool
	drawn     bool
	lastDraw  time.Time
	lastPhase blobstore.Phase
	lastTenth int
}

func newStoreProgress(w io.Writer) *storeProgress {
	f, ok := w.(*os.File)
	return &storeProgress{w: w, bar: ok && term.IsTerminal(int(f.Fd())), lastTenth: -1}
}

func (p *storeProgress) update(pr blobstore.Progress) {
	if p.bar {
		p.drawBar(pr)
		return
	}
	tenth := storePercent(pr) / 10
	switch {
	case pr.Phase == blobstore.PhaseDone:
		fmt.Fprintf(p.w, "%s %s: done, %s\n", pr.Op, pr.Session, storeCounts(pr))
	case pr.Phase != p.lastPhase:
		fmt.Fprintf(p.w, "%s %s: %s (%s)\n", pr.Op, pr.Session, pr.Phase, storeCounts(pr))
	case tenth > p.lastTenth && pr.Object != "":
		fmt.Fprintf(p.w, "%s %s: %d%% (%s)\n", pr.Op, pr.Session, storePercent(pr), storeCounts(pr))
	default:
		return
	}
	p.lastPhase, p.lastTenth = pr.Phase, tenth
}

// drawBar redraws at most ten times a second, and always at the end.
func (p *storeProgress) drawBar(pr blobstore.Progress) {
	now := time.Now()
	if pr.Phase != blobstore.PhaseDone && now.Sub(p.lastDraw) < 100*time.Millisecond {
		return
	}
	p.lastDraw, p.drawn = now, true
	const width = 30
	filled := storePercent(pr) * width / 100
	fmt.Fprintf(p.w, "\r\033[K%s %s [%s%s] %3d%% %s", pr.Op, pr.Session,
		strings.Repeat("#", filled), strings.Repeat(".", width-filled), storePercent(pr), storeCounts(pr))
}

// finish ends the bar's line, so what follows starts on a fresh one.
func (p *storeProgress) finish() {
	if p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
	}
}

func storePercent(pr blobstore.Progress) int {
	switch {
	case pr.TotalBytes > 0:
		return int(min(pr.DoneBytes*100/pr.TotalBytes, 100))
	case pr.TotalObjects > 0:
		return min(pr.DoneObjects*100/pr.TotalObjects, 100)
	}
	return 0
}

func storeCounts(pr blobstore.Progress) string {
	s := fmt.Sprintf("%d/%d objects", pr.DoneObjects, pr.TotalObjects)
	if pr.TotalBytes > 0 {
		return s + ", " + storeBytes(pr.DoneBytes) + "/" + storeBytes(pr.TotalBytes)
	}
	return s + ", " + storeBytes(pr.DoneBytes)
}

func storeBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
