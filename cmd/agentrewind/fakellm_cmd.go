package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentrewind/agentrewind/internal/fakellm"
)

// fakeLLMOptions are the flags of agentrewind fake-llm.
type fakeLLMOptions struct {
	listen, script  string
	shutdownTimeout time.Duration
}

func newFakeLLMCommand() *cobra.Command {
	var o fakeLLMOptions
	cmd := &cobra.Command{
		Use:   "fake-llm --script FILE [--listen ADDR]",
		Short: "Serve a deterministic, scripted fake of the Anthropic and OpenAI model APIs (tests, demos)",
		Long: `Serve a scripted stand-in for the model APIs, for tests, benchmarks and demos: no model, no key.

Endpoints: POST /v1/messages and /v1/messages/count_tokens (Anthropic Messages), POST
/v1/chat/completions (OpenAI Chat Completions) and POST /v1/responses (OpenAI Responses, with the
previous_response_id chains of the responses it answered), each as JSON or as a stream ("stream":
true), in the shapes the official SDKs parse; GET /healthz. Other paths get a 404 in the provider's error shape.

The script (YAML or JSON) is a list of turns; a request gets the first turn whose "when" matches it
(step: the call's number in its conversation; system: text the system prompt contains; message: text
the last message contains; model), or the script's "unmatched" answer, or a 400. Turns answer with
text and tool calls, a stop reason, usage, or an error. Faults (rate_limit, server_error, slow, cut,
stream_error) can be injected per turn or for every request. The same script and request always get
the same bytes. See internal/fakellm/testdata/agent.yaml for an example.

SIGTERM or SIGINT stops taking requests and waits up to --shutdown-timeout for those in flight.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			return o.run(ctx, cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.listen, "listen", "127.0.0.1:8080", "address to serve on")
	fl.StringVar(&o.script, "script", "", "the script: a YAML or JSON file of turns (required)")
	fl.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long requests in flight may take to finish after SIGTERM")
	return cmd
}

func (o *fakeLLMOptions) validate() error {
	if o.script == "" {
		return errors.New("--script is required: a YAML or JSON file of turns")
	}
	if o.shutdownTimeout < 0 {
		return fmt.Errorf("--shutdown-timeout %s is negative", o.shutdownTimeout)
	}
	return nil
}

// run serves the script until ctx ends, then shuts down gracefully. It says where it listens on log.
func (o *fakeLLMOptions) run(ctx context.Context, log io.Writer) error {
	script, err := fakellm.Load(o.script)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.Handle("/", fakellm.New(script))
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 30 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	fmt.Fprintf(log, "agentrewind fake-llm serving %d turns from %s on %s\n", len(script.Turns), o.script, ln.Addr())

	select {
	case err := <-served:
		return fmt.Errorf("serving on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.shutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutting down: %w", err)
	}
	return nil
}
