package demo

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
)

// SeedMarker is the id of the first seeded job: when it exists, the store
// has been seeded (see Seeded).
const SeedMarker = "demo-seed-0000"

// seedRand and trickleRand fix the demo's story: the same payloads, in the
// same order, on every run.
func seedRand() *rand.Rand    { return rand.New(rand.NewPCG(20261129, 1)) }
func trickleRand() *rand.Rand { return rand.New(rand.NewPCG(20261129, 2)) }

var (
	currencies = []string{"EUR", "EUR", "EUR", "USD", "USD", "GBP", "CHF"}
	firstNames = []string{"Ada", "Grace", "Alan", "Edsger", "Barbara", "Ken", "Margaret", "Donald", "Frances", "Niklaus"}
	lastNames  = []string{"Lovelace", "Hopper", "Turing", "Dijkstra", "Liskov", "Thompson", "Hamilton", "Knuth", "Allen", "Wirth"}
	reports    = []string{"daily-kpis", "monthly-revenue", "churn", "ar-aging", "usage-by-plan", "tax-summary"}
	events     = []string{"invoice.paid", "invoice.overdue", "customer.created", "subscription.renewed"}
)

// PoisonReport is the payload of the demo's poison pill: report.render
// panics on it every time, so its fingerprint ends up quarantined.
var PoisonReport = Report{Report: "q3-revenue", Month: "2026-09", Poison: true}

func invoice(r *rand.Rand, n int) Invoice {
	return Invoice{
		Invoice:     fmt.Sprintf("INV-%05d", n),
		Customer:    1000 + r.IntN(400),
		AmountCents: 500 + r.IntN(250000),
		Currency:    currencies[r.IntN(len(currencies))],
		WorkMS:      20 + r.IntN(230),
	}
}

func receipt(r *rand.Rand, inv Invoice) Receipt {
	return Receipt{
		Invoice:  inv.Invoice,
		To:       fmt.Sprintf("billing+%d@example.com", inv.Customer),
		Template: "receipt-v2",
		WorkMS:   10 + r.IntN(120),
	}
}

func fullName(r *rand.Rand) string {
	return firstNames[r.IntN(len(firstNames))] + " " + lastNames[r.IntN(len(lastNames))]
}

// Story fixes what the demo's night holds: when the downstream outage
// ends and how many invoices it had killed before the demo opened.
type Story struct {
	// OutageEnds is when the billing database comes back: invoices that
	// meet the outage fail until then and succeed after it.
	OutageEnds time.Time
	// Backlog is how many invoices died in the outage before the demo
	// opened (seeded with three attempts each and no work, so they die in
	// the demo's first seconds).
	Backlog int
}

// DefaultOutage is how long the demo's outage lasts from the seed, and
// DefaultBacklog how many dead invoices it leaves: with the seed's own
// four outage invoices, the 4,180 of the operator's night.
const (
	DefaultOutage  = 3 * time.Minute
	DefaultBacklog = 4176
)

// BacklogAttempts is how many attempts a backlog invoice had.
const BacklogAttempts = 3

// NewStory is the story of a seed written at seeded: its outage lasts
// outage from then.
func NewStory(seeded time.Time, outage time.Duration, backlog int) Story {
	return Story{OutageEnds: seeded.Add(outage), Backlog: backlog}
}

// outage marks inv as one that meets the story's outage.
func (st Story) outage(inv *Invoice) {
	inv.Fail = "outage"
	end := st.OutageEnds.UTC()
	inv.OutageUntil = &end
}

// SeedJobs returns the demo's initial mix, about three hundred jobs with
// fixed ids and then the outage's backlog, in the order they are
// enqueued. now anchors the deadlines.
func SeedJobs(now time.Time, st Story) []engine.EnqueueParams {
	r := seedRand()
	var out []engine.EnqueueParams
	add := func(p engine.EnqueueParams) {
		p.ID = fmt.Sprintf("demo-seed-%04d", len(out))
		out = append(out, p)
	}

	// Billing: invoices, most of them fine, and their receipts.
	for i := 1; i <= 140; i++ {
		inv := invoice(r, i)
		switch {
		case i%35 == 0:
			st.outage(&inv) // the database is down until the outage ends
		case i%4 == 2 && i <= 126:
			// A typo upstream, 31 invoices: they fail until archived,
			// and succeed once the payload is fixed.
			inv.Currency = "EURO"
		case i%20 == 0:
			inv.Fail = "transient" // back on the third attempt
		}
		add(engine.EnqueueParams{Queue: QueueBilling, Kind: KindInvoiceGenerate, Args: inv,
			Tags: []string{"customer-" + fmt.Sprint(inv.Customer)}})
		if i <= 100 {
			rc := receipt(r, inv)
			switch {
			case i%48 == 0:
				rc.Template = "receipt-legacy" // deleted last week
			case i%19 == 0:
				rc.Unsubscribed = true // skipped
			}
			add(engine.EnqueueParams{Queue: QueueEmail, Kind: KindReceiptSend, Args: rc})
		}
	}

	// Customer syncs: current schema, and old version 1 payloads that the
	// upcaster brings forward.
	for i := 1; i <= 20; i++ {
		id := 2000 + i
		if i%5 < 2 {
			add(engine.EnqueueParams{Queue: QueueBilling, Kind: KindCustomerSync, SchemaVersion: 1,
				Args: CustomerV1{CustomerID: id, Name: fullName(r)}})
			continue
		}
		first, last := firstNames[r.IntN(len(firstNames))], lastNames[r.IntN(len(lastNames))]
		add(engine.EnqueueParams{Queue: QueueBilling, Kind: KindCustomerSync,
			Args: CustomerV2{CustomerID: id, FirstName: first, LastName: last, WorkMS: 10 + r.IntN(60)}})
	}

	// Webhooks: version 3 and 2 run; version 1 has no upcaster path and
	// becomes undecodable.
	for i := 1; i <= 23; i++ {
		ev := events[r.IntN(len(events))]
		url := fmt.Sprintf("https://hooks.example.com/t/%d", 300+i)
		switch {
		case i%8 == 0:
			add(engine.EnqueueParams{Queue: QueueEmail, Kind: KindWebhookDeliver, SchemaVersion: 1,
				Args: map[string]any{"endpoint": url, "type": ev}})
		case i%4 == 0:
			add(engine.EnqueueParams{Queue: QueueEmail, Kind: KindWebhookDeliver, SchemaVersion: 2,
				Args: map[string]any{"url": url, "event": ev, "secret": "whsec-" + fmt.Sprint(i)}})
		default:
			add(engine.EnqueueParams{Queue: QueueEmail, Kind: KindWebhookDeliver,
				Args: Webhook{URL: url, Event: ev, Secret: "whsec-" + fmt.Sprint(i), WorkMS: 20 + r.IntN(80)}})
		}
	}

	// Reports: slow ones, one poison pill, and two that miss their
	// deadline.
	for i := 1; i <= 24; i++ {
		add(engine.EnqueueParams{Queue: QueueReports, Kind: KindReportRender,
			Args: Report{Report: reports[r.IntN(len(reports))], Month: fmt.Sprintf("2026-%02d", 1+i%11), WorkMS: 200 + r.IntN(1300)}})
		if i == 6 {
			add(engine.EnqueueParams{Queue: QueueReports, Kind: KindReportRender, Args: PoisonReport})
		}
	}
	deadline := now.Add(2 * time.Second)
	for _, name := range []string{"board-pack", "investor-update"} {
		add(engine.EnqueueParams{Queue: QueueReports, Kind: KindReportRender, Deadline: &deadline,
			Args: Report{Report: name, Month: "2026-10", WorkMS: 5000}})
	}

	// Orders, a workflow of three steps: three meet the outage at their
	// charge and die there, their reservation kept; after the outage a
	// replay from the charge (or a retry) finishes them. Fixed values,
	// not drawn: the backlog below draws the same with or without them.
	for i := 1; i <= 9; i++ {
		o := Order{Order: fmt.Sprintf("ORD-%04d", 7000+i), Customer: 1100 + 7*i, AmountCents: 1900 + 1250*i, WorkMS: 40 + 15*i}
		if i%3 == 0 {
			o.Fail = "outage"
			end := st.OutageEnds.UTC()
			o.OutageUntil = &end
		}
		add(engine.EnqueueParams{Queue: QueueBilling, Kind: KindOrderFulfil, Args: o})
	}

	// The outage's backlog: invoices that spent their attempts against
	// the dead database before the demo opened. No work, so they die in
	// the first seconds; their outage ends with the story's.
	for i := 1; i <= st.Backlog; i++ {
		inv := invoice(r, 50000+i)
		inv.WorkMS = 0
		st.outage(&inv)
		out = append(out, engine.EnqueueParams{ID: fmt.Sprintf("demo-outage-%05d", i), Queue: QueueBilling,
			Kind: KindInvoiceGenerate, Args: inv, MaxAttempts: BacklogAttempts})
	}
	return out
}

// Seeded reports whether the demo's seed is in the store (its first job
// exists).
func Seeded(ctx context.Context, s backend.Store) (bool, error) {
	_, ok, err := seededAt(ctx, s)
	return ok, err
}

// seededAt is when the seed's first job was written, if it was.
func seededAt(ctx context.Context, s backend.Store) (time.Time, bool, error) {
	j, err := s.JobGetByID(ctx, &backend.JobGetByIDParams{ID: SeedMarker})
	switch {
	case err == nil:
		return j.CreatedAt, true, nil
	case errors.Is(err, engine.ErrNotFound):
		return time.Time{}, false, nil
	}
	return time.Time{}, false, fmt.Errorf("demo: look for the seed: %w", err)
}

// StoryOf is the story of the store's seed: the outage lasts outage from
// when the seed was written, or from now for a store not seeded yet (then
// seeded is false). A demo reopened on its file keeps its night: the
// outage it left behind is not started again.
func StoryOf(ctx context.Context, s backend.Store, outage time.Duration, backlog int) (st Story, seeded bool, err error) {
	at, seeded, err := seededAt(ctx, s)
	if err != nil {
		return Story{}, false, err
	}
	if !seeded {
		at = time.Now()
	}
	return NewStory(at, outage, backlog), seeded, nil
}

// Seed enqueues the initial mix. It is idempotent: the jobs have fixed ids,
// so a second call finds them (or is refused for the quarantined poison
// pill) and adds nothing.
func Seed(ctx context.Context, e *engine.Engine, st Story) error {
	ps := SeedJobs(time.Now(), st)
	res, err := e.EnqueueMany(ctx, ps)
	if err != nil {
		return fmt.Errorf("demo: seed: %w", err)
	}
	var errs []error
	for i, r := range res {
		if r.Err != nil && !errors.Is(r.Err, engine.ErrQuarantined) {
			errs = append(errs, fmt.Errorf("demo: seed job %s: %w", ps[i].ID, r.Err))
		}
	}
	return errors.Join(errs...)
}

// TrickleJobs returns the next n jobs of the demo's steady trickle from r:
// mostly good invoices with their receipts and a report now and then, with
// the same kinds of failures as the seed, rarer.
// Invoices that meet the database down fail until the story's outage ends.
func TrickleJobs(r *rand.Rand, n int, st Story) []engine.EnqueueParams {
	out := make([]engine.EnqueueParams, 0, n)
	for len(out) < n {
		roll := r.IntN(100)
		switch {
		case roll < 55:
			inv := invoice(r, 10000+r.IntN(90000))
			switch f := r.IntN(100); {
			case f < 3:
				st.outage(&inv)
			case f < 8:
				inv.Fail = "transient"
			case f < 10:
				inv.Currency = "EURO"
			}
			out = append(out, engine.EnqueueParams{Queue: QueueBilling, Kind: KindInvoiceGenerate, Args: inv})
		case roll < 85:
			rc := receipt(r, invoice(r, 10000+r.IntN(90000)))
			switch f := r.IntN(100); {
			case f < 4:
				rc.Template = "receipt-legacy"
			case f < 7:
				rc.Unsubscribed = true
			}
			out = append(out, engine.EnqueueParams{Queue: QueueEmail, Kind: KindReceiptSend, Args: rc})
		case roll < 93:
			out = append(out, engine.EnqueueParams{Queue: QueueBilling, Kind: KindCustomerSync,
				Args: CustomerV2{CustomerID: 3000 + r.IntN(1000), FirstName: firstNames[r.IntN(len(firstNames))],
					LastName: lastNames[r.IntN(len(lastNames))], WorkMS: 10 + r.IntN(60)}})
		case roll < 99:
			out = append(out, engine.EnqueueParams{Queue: QueueReports, Kind: KindReportRender,
				Args: Report{Report: reports[r.IntN(len(reports))], Month: "2026-11", WorkMS: 200 + r.IntN(1300)}})
		default:
			// The poison pill again: refused once its fingerprint is
			// quarantined.
			out = append(out, engine.EnqueueParams{Queue: QueueReports, Kind: KindReportRender, Args: PoisonReport})
		}
	}
	return out
}

// Trickle enqueues one job every `every` until ctx ends. Refusals (the
// quarantined poison pill) and store errors do not stop it: the next tick
// tries again.
func Trickle(ctx context.Context, e *engine.Engine, every time.Duration, st Story) {
	if every <= 0 {
		every = time.Second
	}
	r := trickleRand()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_, _ = e.EnqueueMany(ctx, TrickleJobs(r, 1, st))
	}
}
