package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/api/apimetrics"
	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/demo"
	"github.com/sluicehq/sluice/internal/redact"
	"github.com/sluicehq/sluice/internal/storeurl"
)

type serveOptions struct {
	store       string
	listen      string
	tokens      string
	readOnly    bool
	hideErrors  bool // --hide-errors-from-viewers
	demoWorkers bool
	ssh         string // address of the console over SSH; "" for none
	sshKeys     string // authorized keys file
	sshHostKey  string
	migrate     bool
	otel        bool // --otel: export over OTLP without an endpoint variable
	// sshLoginGrace and sshMaxPreAuth bound the SSH connections that have
	// not opened a session (sshLoginGrace and sshMaxPreAuth when 0).
	sshLoginGrace time.Duration
	sshMaxPreAuth int

	// retention is --retention (retention.go).
	retention retentionFlag
}

func newServeCmd(lo *logOptions) *cobra.Command {
	o := &serveOptions{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the HTTP control API over a store, and run its maintenance",
		Long: `Run an engine over the store that takes its turn at maintenance (scheduling,
reaping, retention, bulk operations) and serve the control API under
/api/v1 (and Prometheus metrics at /metrics) for the console, the command
line and scripts.

Tokens: --tokens FILE, or the SLUICE_TOKENS environment variable, holds one
name:role:token per line (roles viewer, inspector, operator, admin; each
token ` + strconv.Itoa(api.MinTokenLength) + ` characters or more; lines starting with # are ignored).
Without tokens every request acts as admin, so the server refuses to
listen anywhere but on loopback.

--read-only refuses every mutation with 403. --demo-workers also runs
workers for the demo's kinds on the billing, email and reports queues.

Settings may come from the environment (SLUICE_STORE, SLUICE_LISTEN,
SLUICE_READ_ONLY, ...) or the config file (a serve: section, or the top
level); a flag given on the command line wins. --tokens may be set in the
config file; the SLUICE_TOKENS variable holds the tokens themselves.

--ssh ADDR also serves the console over SSH: each key of
--ssh-authorized-keys (OpenSSH authorized_keys lines) opens its own
console session on this engine, as the role its line gives with the
option sluice-role="viewer|inspector|operator|admin" (operator when
absent), named by the key's comment. Sessions obey the same roles and
read-only mode as the API, and edit payloads in the console's own editor:
no program is ever started on the server. The host
key is read from --ssh-host-key, and generated there when missing.

/metrics also counts the transitions this process's workers and reaper
write (sluice_job_transitions_total) and times handlers
(sluice_handler_duration_seconds). It stays as it is when OpenTelemetry
exports too.

` + otelHelp,
		Example: `  sluice serve --store sqlite://sluice.db --listen 127.0.0.1:8080
  sluice serve --store sqlite://sluice.db --listen 0.0.0.0:8080 --tokens /etc/sluice/tokens
  curl 'http://127.0.0.1:8080/api/v1/jobs?state=archived&limit=50'
  sluice serve --store sqlite://sluice.db --ssh 0.0.0.0:2222 --ssh-authorized-keys ~/.ssh/authorized_keys
  ssh -p 2222 sluice-host
  OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318 sluice serve --store sqlite://sluice.db`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runServe(cmd.Context(), o, lo, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.store, "store", "sqlite://sluice.db", "store URL (env SLUICE_STORE)")
	f.BoolVar(&o.migrate, "migrate", false, migrateFlagUsage)
	f.StringVar(&o.listen, "listen", "127.0.0.1:8080", "address to listen on; port 0 picks a free one (env SLUICE_LISTEN)")
	f.StringVar(&o.tokens, "tokens", "", "file of name:role:token lines (default: the SLUICE_TOKENS variable; none: loopback only, everyone admin)")
	f.BoolVar(&o.readOnly, "read-only", false, "refuse every mutation (403)")
	f.BoolVar(&o.hideErrors, "hide-errors-from-viewers", false, "hide jobs' error text from the viewer role (for errors that carry personal data)")
	f.BoolVar(&o.demoWorkers, "demo-workers", false, "also run workers for the demo's kinds (queues billing, email, reports)")
	f.StringVar(&o.ssh, "ssh", "", "also serve the console over SSH on this address, as in 0.0.0.0:2222 (env SLUICE_SSH)")
	f.StringVar(&o.sshKeys, "ssh-authorized-keys", "", "authorized_keys file of the keys that may open the console (needed with --ssh)")
	f.StringVar(&o.sshHostKey, "ssh-host-key", "", "SSH host key file, generated when missing (default $XDG_DATA_HOME/sluice/ssh_host_ed25519_key)")
	f.BoolVar(&o.otel, "otel", false, otelFlagUsage)
	o.retention.add(f)
	return cmd
}

// loadTokens reads the tokens file, or SLUICE_TOKENS when no file is
// named.
func loadTokens(file string) (map[string]api.Identity, string, error) {
	if file != "" {
		f, err := os.Open(file)
		if err != nil {
			return nil, "", fmt.Errorf("tokens: %w", err)
		}
		defer f.Close()
		toks, err := api.ParseTokens(f)
		if err != nil {
			return nil, "", fmt.Errorf("tokens file %s: %w", file, err)
		}
		return toks, "file " + file, nil
	}
	if env := os.Getenv("SLUICE_TOKENS"); env != "" {
		toks, err := api.ParseTokens(strings.NewReader(env))
		if err != nil {
			return nil, "", fmt.Errorf("SLUICE_TOKENS: %w", err)
		}
		return toks, "SLUICE_TOKENS", nil
	}
	return nil, "", nil
}

// isLoopback reports whether a listen address is reachable only from this
// machine: a loopback IP or localhost. An empty host listens everywhere.
func isLoopback(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, fmt.Errorf("%w: --listen %q: want host:port, as in 127.0.0.1:8080", engine.ErrInvalid, addr)
	}
	if strings.EqualFold(host, "localhost") {
		return true, nil
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback(), nil
}

func runServe(ctx context.Context, o *serveOptions, lo *logOptions, out io.Writer) error {
	log, closeLog, err := lo.Logger(os.Stderr)
	if err != nil {
		return err
	}
	defer closeLog()
	tokens, tokenSource, err := loadTokens(o.tokens)
	if err != nil {
		return err
	}
	if o.tokens != "" {
		warnIfShared(log, o.tokens, "tokens file")
	}
	loop, err := isLoopback(o.listen)
	if err != nil {
		return err
	}
	if len(tokens) == 0 && !loop {
		return fmt.Errorf("serve: refusing to listen on %s without tokens: every request would act as admin; "+
			"give --tokens FILE (or SLUICE_TOKENS) or listen on 127.0.0.1", o.listen)
	}
	ctx, stop := signalContext(ctx)
	defer stop()
	tel, log, err := startTelemetry(ctx, o.otel, log)
	if err != nil {
		return err
	}
	// Deferred before the store's close and the engine's stop, so it runs
	// after them: the spans of the jobs the engine drains go too.
	defer stopTelemetry(ctx, tel, log)

	storeURL, err := o.retention.archive.storeURL(o.store)
	if err != nil {
		return err
	}
	open := storeurl.Open
	if o.migrate {
		open = storeurl.OpenMigrating
	}
	store, err := open(ctx, storeURL, log)
	if err != nil {
		return err
	}
	defer store.Close()
	// Transitions and handler times of this process's workers (with
	// --demo-workers) and reaper, on /metrics.
	obs := apimetrics.NewEngineMetrics()
	cfg := engine.Config{Logger: log, ShutdownTimeout: 10 * time.Second, Observer: obs, Interceptor: tel.Interceptor()}
	if err := o.retention.apply(&cfg); err != nil {
		return err
	}
	e, err := startEmbedded(ctx, store, cfg, o.demoWorkers)
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
		defer cancel()
		if err := e.Stop(sctx); err != nil {
			log.Warn("engine stop", "err", err)
		}
	}()
	if err := tel.Register(e); err != nil {
		return err
	}
	// Before the engine stops: no collection reads it after.
	defer tel.Unregister()

	metrics := apimetrics.New(e, log)
	metrics.Registry().MustRegister(obs)
	srv := api.NewServer(e, api.ServerOptions{Tokens: tokens, ReadOnly: o.readOnly, Logger: log, Metrics: metrics,
		HideErrorsFromViewers: o.hideErrors})
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	ln = api.LimitListener(ln, api.DefaultMaxConns)
	// Streams (GET /events) end when baseCtx does, so shutdown is not held
	// up by them.
	baseCtx, cancelBase := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelBase()
	hs := api.NewHTTPServer(srv, baseCtx)
	who := "no tokens: every request acts as admin"
	if len(tokens) > 0 {
		who = fmt.Sprintf("%d tokens from %s", len(tokens), tokenSource)
	}
	mode := ""
	if o.readOnly {
		mode = ", read-only"
	}
	fmt.Fprintf(out, "sluice: serving http://%s%s over %s (%s%s)\n", ln.Addr(), api.Prefix, redact.URL(o.store), who, mode)
	log.Info("serving", "addr", ln.Addr().String(), "store", redact.URL(o.store), "tokens", len(tokens), "read_only", o.readOnly, "demo_workers", o.demoWorkers)

	if o.ssh != "" {
		sc, err := startSSHConsole(o, srv, log)
		if err != nil {
			ln.Close()
			return err
		}
		defer sc.stop()
		fmt.Fprintf(out, "sluice: serving the console over ssh://%s (%d keys from %s%s)\n", sc.ln.Addr(), len(sc.keys), o.sshKeys, mode)
		log.Info("serving ssh", "addr", sc.ln.Addr().String(), "keys", len(sc.keys))
	}

	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("stopping the server")
	cancelBase()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		log.Warn("server shutdown", "err", err)
	}
	return nil
}

// startEmbedded starts an engine over store that runs maintenance and, with
// demoWorkers, the demo kinds on the demo queues.
func startEmbedded(ctx context.Context, store backend.Store, cfg engine.Config, demoWorkers bool) (*engine.Engine, error) {
	if demoWorkers {
		cfg.Queues = map[string]engine.QueueConfig{}
		for _, q := range demo.Queues {
			cfg.Queues[q] = engine.QueueConfig{Concurrency: 8}
		}
		cfg.CrashBackoff = demo.CrashBackoff
	}
	e, err := engine.New(store, cfg)
	if err != nil {
		return nil, err
	}
	if demoWorkers {
		if err := demo.Register(e); err != nil {
			return nil, err
		}
	}
	if err := e.Start(ctx); err != nil {
		return nil, err
	}
	return e, nil
}
