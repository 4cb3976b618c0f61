// Command server is a service that mounts the Sluice control API in its
// own http.ServeMux, behind its own middleware, beside its own routes.
//
//	go run ./examples/server -listen 127.0.0.1:8080
//	curl -X POST 'http://127.0.0.1:8080/orders?item=book'      # the service's own route
//	curl -u ops:secret 'http://127.0.0.1:8080/api/v1/jobs?state=completed'
//
// The API is an http.Handler (api.NewServer over an engine.Control) that
// answers under api.Prefix (/api/v1). Here the service's middleware
// authenticates operators itself (HTTP basic auth, standing in for your
// single sign-on), stamps a request id and logs each request, and only then
// hands the request to the API. A Go client (api.NewClient, an
// engine.Control like the embedded engine) passes the middleware with an
// http.Client whose transport adds the credentials; main_test.go does so.
// The API's own bearer tokens and roles (api.ServerOptions.Tokens) are the
// other way, and the one `sluice tui --api URL --token T` speaks.
package main

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/engine"
)

// The service's queue and kind.
const (
	QueueOrders = "orders"
	KindShip    = "order.ship"
)

// Order is order.ship's payload.
type Order struct {
	Item string `json:"item"`
}

// Operators are who may use the control API: user name -> password.
type Operators map[string]string

// newMux is the service's whole HTTP surface: its own routes, and the
// control API behind its middleware.
func newMux(e *engine.Engine, ops Operators, log *slog.Logger) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "orders service")
	})
	mux.HandleFunc("POST /orders", func(w http.ResponseWriter, r *http.Request) {
		item := r.URL.Query().Get("item")
		if item == "" {
			http.Error(w, "item is required", http.StatusBadRequest)
			return
		}
		job, err := e.Enqueue(r.Context(), engine.EnqueueParams{Queue: QueueOrders, Kind: KindShip, Args: Order{Item: item}})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintln(w, job.ID)
	})
	// No tokens: every request the middleware lets through acts as admin,
	// named "local" on the jobs' timelines. The middleware is what guards
	// the API here.
	ctl := api.NewServer(e, api.ServerOptions{Logger: log})
	mux.Handle(api.Prefix+"/", withRequestID(log, requireOperator(ops, ctl)))
	return mux
}

// requireOperator lets through only the operators' requests.
func requireOperator(ops Operators, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		want, known := ops[user]
		if !ok || !known || subtle.ConstantTimeCompare([]byte(pass), []byte(want)) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="operators"`)
			http.Error(w, "operators only", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// withRequestID stamps each request with an id, answers it in X-Request-Id
// and logs the request.
func withRequestID(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b [8]byte
		_, _ = rand.Read(b[:])
		id := hex.EncodeToString(b[:])
		w.Header().Set("X-Request-Id", id)
		start := time.Now()
		next.ServeHTTP(w, r)
		log.Info("request", "id", id, "method", r.Method, "path", r.URL.Path, "took", time.Since(start))
	})
}

// newEngine is the service's engine: workers for its kind, and
// maintenance.
func newEngine(store *sqlite.Store, log *slog.Logger) (*engine.Engine, error) {
	e, err := engine.New(store, engine.Config{
		Queues: map[string]engine.QueueConfig{QueueOrders: {Concurrency: 4}},
		Logger: log,
	})
	if err != nil {
		return nil, err
	}
	err = e.Register(engine.Kind{Name: KindShip, MaxAttempts: 3,
		Handler: engine.TypedHandler(func(ctx context.Context, _ *engine.Job, o Order) error {
			if o.Item == "unobtainium" {
				return engine.Skip("out of stock for good")
			}
			return ctx.Err() // a real service books the parcel here
		})})
	if err != nil {
		return nil, err
	}
	return e, nil
}

func main() {
	listen := flag.String("listen", "127.0.0.1:8080", "address to listen on")
	db := flag.String("db", "server.db", "SQLite file")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	// Operators from the environment, as a service keeps secrets.
	ops := Operators{"ops": os.Getenv("OPS_PASSWORD")}
	if ops["ops"] == "" {
		ops["ops"] = "secret"
		log.Warn("OPS_PASSWORD is not set: the API takes ops:secret")
	}
	if err := run(ctx, *listen, *db, ops, log); err != nil {
		log.Error("server", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, listen, path string, ops Operators, log *slog.Logger) error {
	store, err := sqlite.Open(ctx, path, sqlite.Options{Logger: log})
	if err != nil {
		return err
	}
	defer store.Close()
	e, err := newEngine(store, log)
	if err != nil {
		return err
	}
	if err := e.Start(ctx); err != nil {
		return err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
		_ = e.Stop(stopCtx)
	}()

	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	// The event stream (GET /api/v1/events) ends with baseCtx, so shutdown
	// does not wait for open consoles.
	baseCtx, cancelBase := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelBase()
	hs := &http.Server{
		Handler:           newMux(e, ops, log),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
	}
	log.Info("serving", "addr", ln.Addr().String(), "api", api.Prefix)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	cancelBase()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
