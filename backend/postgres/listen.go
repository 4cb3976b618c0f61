package postgres

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/backend"
)

// Cross-process wake-ups: LISTEN/NOTIFY.
//
// Every write that makes jobs available (inserts, due jobs, retries,
// releases, resumed queues) sends one notification on the schema's
// channel in its own transaction, naming the queues that got work (one
// per line; empty for "every queue"), so the server delivers it on commit
// and a batch sends one, not one per job. The listener holds one
// connection of its own, outside the pool: with PgBouncer in transaction
// mode LISTEN needs a direct connection, which listen_url names. When the
// connection drops it reconnects with backoff, logs once per outage, and
// on reconnecting wakes every queue, since notifications sent meanwhile
// are lost; the engine's own poll stays the fallback in any case.

var _ backend.Notifier = (*Store)(nil)

// channel is the schema's notification channel. Channel names are
// identifiers, cut at 63 bytes.
func (s *Store) channel() string {
	c := "sluice_" + s.schema
	if len(c) > 63 {
		c = c[:63]
	}
	return c
}

// notifier runs the LISTEN connection; fan fans its notifications out.
type notifier struct {
	s *Store
	// config is the LISTEN connection's configuration, made for each
	// connection: the pool's (a copy) or the listen URL's.
	config func() (*pgx.ConnConfig, error)
	fan    *backend.WakeFanout
}

func newNotifier(s *Store, config func() (*pgx.ConnConfig, error)) *notifier {
	n := &notifier{s: s, config: config}
	n.fan = backend.NewWakeFanout(n.run)
	return n
}

// Wakeups returns a channel that receives the name of each queue that
// got work in any process ("" for every queue), until ctx ends (see
// backend.Notifier and backend.WakeFanout). The first call starts the
// listener. A store opened with NoListen returns a channel that never
// receives.
func (s *Store) Wakeups(ctx context.Context) <-chan string {
	n := s.notify
	if n == nil || s.closed.Load() {
		return make(chan string)
	}
	return n.fan.Subscribe(ctx)
}

func (n *notifier) publish(queue string) { n.fan.Publish(queue) }

func (n *notifier) close() { n.fan.Close() }

// run listens until ctx ends, reconnecting with backoff.
func (n *notifier) run(ctx context.Context) {
	backoff := 100 * time.Millisecond
	down := false
	for ctx.Err() == nil {
		err := n.listen(ctx, func() {
			if down {
				n.s.log.Info("postgres: listener reconnected", "store", n.s.url)
				down = false
				n.publish("") // notifications sent while down are lost
			}
			backoff = 100 * time.Millisecond
		})
		if ctx.Err() != nil {
			return
		}
		if !down {
			n.s.log.Warn("postgres: listener lost its connection; workers poll until it is back", "store", n.s.url, "err", err)
			down = true
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// listen connects, LISTENs and delivers notifications until an error.
func (n *notifier) listen(ctx context.Context, up func()) error {
	cfg, err := n.config()
	if err != nil {
		return err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{n.s.channel()}.Sanitize()); err != nil {
		return err
	}
	up()
	for {
		note, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if note.Payload == "" {
			n.publish("")
			continue
		}
		for q := range strings.SplitSeq(note.Payload, "\n") {
			n.publish(q)
		}
	}
}
