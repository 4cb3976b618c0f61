// Package demo holds the job kinds and the data of `sluice demo` (and of
// `sluice worker --demo`, `tui --worker` and `serve --demo-workers`): a
// small billing, email and reporting system whose
// jobs succeed, fail for a while, fail for good, skip, panic every time,
// arrive in an old schema version, or miss their deadline — so the console
// has every kind of death to show. What a job does is decided by its
// payload (and, for the outage, the clock) alone, so every run of the demo
// tells the same story: the operator's night the console is built for. A
// downstream outage has left a backlog of a few thousand dead invoices and
// ends a few minutes in (Story), after which a redrive succeeds; invoices
// with bad data succeed once their payload is fixed.
//
// The kinds of the process fault tests, among them one that kills its own
// process, are not here: they are in internal/chaos, built only into the
// test worker binary (internal/testworker).
//
// The package knows the engine only; it never names a backend.
package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// Queues of the demo.
const (
	QueueBilling = "billing"
	QueueEmail   = "email"
	QueueReports = "reports"
)

// Queues lists the demo's queues, in display order.
var Queues = []string{QueueBilling, QueueEmail, QueueReports}

// Kind names.
const (
	KindInvoiceGenerate = "invoice.generate"
	KindReceiptSend     = "receipt.send"
	KindReportRender    = "report.render"
	// KindCustomerSync is at schema version 2; version 1 payloads are
	// upcast.
	KindCustomerSync = "customer.sync"
	// KindWebhookDeliver is at schema version 3 with an upcaster from 2
	// only: a version 1 payload has no path and becomes undecodable.
	KindWebhookDeliver = "webhook.deliver"
	// KindOrderFulfil is a durable workflow of three steps (reserve,
	// charge, confirm): an order that meets the outage dies at its
	// charge with its reservation recorded, and is replayed from the
	// charge (F in the console) once the outage is over.
	KindOrderFulfil = "order.fulfil"
)

// Backoff is the demo's retry delay: attempt n waits n seconds (at most
// five), so failures turn into deaths within a minute of watching.
func Backoff(attempt int) time.Duration {
	return time.Duration(min(max(attempt, 1), 5)) * time.Second
}

// CrashBackoff is the demo's delay before a crashed job runs again: a
// little longer than an ordinary retry, as the engine's default is.
func CrashBackoff(crash int) time.Duration {
	return time.Duration(min(max(crash, 1), 5)+2) * time.Second
}

// Invoice is the payload of invoice.generate.
type Invoice struct {
	Invoice     string `json:"invoice"`
	Customer    int    `json:"customer"`
	AmountCents int    `json:"amount_cents"`
	Currency    string `json:"currency"`
	// Fail: "" succeeds; "transient" fails the first two attempts (the
	// database is unreachable for a moment); "outage" fails every attempt
	// made before OutageUntil (the billing database is down) and succeeds
	// after it, so a redrive once the outage is over goes through;
	// "always" fails every attempt (stores seeded by older demos hold
	// such jobs; the demo no longer writes them).
	Fail string `json:"fail,omitempty"`
	// OutageUntil is when the outage an "outage" invoice meets ends.
	OutageUntil *time.Time `json:"outage_until,omitempty"`
	WorkMS      int        `json:"work_ms,omitempty"`
}

// Receipt is the payload of receipt.send.
type Receipt struct {
	Invoice  string `json:"invoice"`
	To       string `json:"to"`
	Template string `json:"template"`
	// Unsubscribed recipients are skipped: the job is archived at once.
	Unsubscribed bool `json:"unsubscribed,omitempty"`
	WorkMS       int  `json:"work_ms,omitempty"`
}

// Report is the payload of report.render.
type Report struct {
	Report string `json:"report"`
	Month  string `json:"month,omitempty"`
	// Poison makes the handler panic every time: a poison pill, which is
	// quarantined after the crash limit.
	Poison bool `json:"poison,omitempty"`
	WorkMS int  `json:"work_ms,omitempty"`
}

// Order is the payload of order.fulfil.
type Order struct {
	Order       string `json:"order"`
	Customer    int    `json:"customer"`
	AmountCents int    `json:"amount_cents"`
	// Fail "outage": the charge step fails until OutageUntil (the
	// payment gateway's ledger lives in the billing database).
	Fail        string     `json:"fail,omitempty"`
	OutageUntil *time.Time `json:"outage_until,omitempty"`
	WorkMS      int        `json:"work_ms,omitempty"`
}

// CustomerV1 is customer.sync's first schema; CustomerV2 its current one.
type CustomerV1 struct {
	CustomerID int    `json:"customer_id"`
	Name       string `json:"name"`
}

type CustomerV2 struct {
	CustomerID int    `json:"customer_id"`
	FirstName  string `json:"first_name"`
	LastName   string `json:"last_name"`
	WorkMS     int    `json:"work_ms,omitempty"`
}

// Webhook is webhook.deliver's current (version 3) payload.
type Webhook struct {
	URL    string `json:"url"`
	Event  string `json:"event"`
	Secret string `json:"secret_ref"`
	WorkMS int    `json:"work_ms,omitempty"`
}

// supportedCurrencies are what the invoice generator accepts.
var supportedCurrencies = map[string]bool{"EUR": true, "USD": true, "GBP": true, "CHF": true}

// Register adds every demo kind to e.
func Register(e *engine.Engine) error {
	kinds := []engine.Kind{
		{
			Name:        KindInvoiceGenerate,
			Handler:     engine.TypedHandler(invoiceGenerate),
			MaxAttempts: 5,
			Backoff:     Backoff,
		},
		{
			Name:        KindReceiptSend,
			Handler:     engine.TypedHandler(receiptSend),
			MaxAttempts: 3,
			Backoff:     Backoff,
		},
		{
			Name:        KindReportRender,
			Handler:     engine.TypedHandler(reportRender),
			MaxAttempts: 3,
			Backoff:     Backoff,
		},
		{
			Name:      KindCustomerSync,
			Handler:   engine.TypedHandler(customerSync),
			Version:   2,
			Upcasters: map[int]engine.Upcaster{1: customerV1toV2},
			Backoff:   Backoff,
		},
		{
			Name:        KindOrderFulfil,
			Handler:     engine.TypedHandler(orderFulfil),
			MaxAttempts: 3,
			Backoff:     Backoff,
		},
		{
			Name:      KindWebhookDeliver,
			Handler:   engine.TypedHandler(webhookDeliver),
			Version:   3,
			Upcasters: map[int]engine.Upcaster{2: webhookV2toV3},
			Backoff:   Backoff,
		},
	}
	for _, k := range kinds {
		if err := e.Register(k); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
	}
	for _, p := range Schedules() {
		if err := e.AddPeriodic(p); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
	}
	return nil
}

// Schedules are the demo's periodic jobs, so that :schedules shows next
// fires in two zones. They fire at night and on the first of a month:
// a demo or a test opened for minutes seldom sees one fire.
func Schedules() []engine.Periodic {
	return []engine.Periodic{
		{
			Name: "reports.nightly", Cron: "30 2 * * *", Zone: "Europe/Berlin", Overlap: engine.OverlapSkip,
			Job: engine.EnqueueParams{Queue: QueueReports, Kind: KindReportRender, Args: Report{Report: "daily-kpis", WorkMS: 800}},
		},
		{
			// The month before the tick's, in the schedule's zone.
			Name: "reports.monthly", Cron: "0 6 1 * *", Zone: "America/New_York", Missed: engine.MissedRunOnce,
			JobFunc: func(tick time.Time) engine.EnqueueParams {
				ny, err := time.LoadLocation("America/New_York")
				if err != nil {
					ny = time.UTC
				}
				month := tick.In(ny).AddDate(0, -1, 0).Format("2006-01")
				return engine.EnqueueParams{Queue: QueueReports, Kind: KindReportRender, Args: Report{Report: "monthly-revenue", Month: month, WorkMS: 1500}}
			},
		},
	}
}

// work pretends to do ms milliseconds of work, giving up when ctx ends.
func work(ctx context.Context, ms int) error {
	if ms <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(time.Duration(ms) * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func invoiceGenerate(ctx context.Context, job *engine.Job, p Invoice) error {
	if err := work(ctx, p.WorkMS); err != nil {
		return err
	}
	if !supportedCurrencies[p.Currency] {
		return fmt.Errorf("invoice %s: invalid currency %q", p.Invoice, p.Currency)
	}
	switch p.Fail {
	case "always":
		return errors.New("dial tcp 10.0.0.12:5432: connection refused")
	case "outage":
		if p.OutageUntil != nil && time.Now().Before(*p.OutageUntil) {
			return errors.New("dial tcp 10.0.0.12:5432: connection refused")
		}
	case "transient":
		if job.Attempt < 2 {
			return errors.New("dial tcp 10.0.0.12:5432: connection refused")
		}
	}
	return nil
}

// knownTemplates are the email templates that exist.
var knownTemplates = map[string]bool{"receipt-v2": true, "receipt-v3": true}

func receiptSend(ctx context.Context, _ *engine.Job, p Receipt) error {
	if err := work(ctx, p.WorkMS); err != nil {
		return err
	}
	if p.Unsubscribed {
		return engine.Skip(fmt.Sprintf("recipient %s unsubscribed", p.To))
	}
	if !knownTemplates[p.Template] {
		return fmt.Errorf("render receipt for %s: template not found: %q", p.Invoice, p.Template)
	}
	return nil
}

func reportRender(ctx context.Context, _ *engine.Job, p Report) error {
	if p.Poison {
		// A bug that takes the worker down every time it meets this
		// report: a nil map deep in the renderer.
		var cells map[string]int
		//lint:ignore SA5000 the panic is the point: a poison job that crashes its worker.
		cells[p.Report]++
	}
	return work(ctx, p.WorkMS)
}

func customerV1toV2(raw json.RawMessage) (json.RawMessage, error) {
	var v1 CustomerV1
	if err := json.Unmarshal(raw, &v1); err != nil {
		return nil, err
	}
	first, last, _ := strings.Cut(strings.TrimSpace(v1.Name), " ")
	return json.Marshal(CustomerV2{CustomerID: v1.CustomerID, FirstName: first, LastName: last})
}

func customerSync(ctx context.Context, _ *engine.Job, p CustomerV2) error {
	if p.FirstName == "" {
		return engine.Undecodable(fmt.Errorf("customer %d has no first name", p.CustomerID))
	}
	return work(ctx, p.WorkMS)
}

// webhookV2toV3 renames "secret" to "secret_ref".
func webhookV2toV3(raw json.RawMessage) (json.RawMessage, error) {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	if s, ok := m["secret"]; ok {
		m["secret_ref"] = s
		delete(m, "secret")
	}
	return json.Marshal(m)
}

func webhookDeliver(ctx context.Context, _ *engine.Job, p Webhook) error {
	return work(ctx, p.WorkMS)
}

// orderFulfil is the demo's workflow: each step's result is checkpointed,
// so a retry or a replay runs again only what did not finish.
func orderFulfil(ctx context.Context, _ *engine.Job, p Order) error {
	hold, err := engine.Step(ctx, "reserve", func(ctx context.Context) (string, error) {
		return "hold-" + strings.TrimPrefix(p.Order, "ORD-"), work(ctx, p.WorkMS)
	})
	if err != nil {
		return err
	}
	charge, err := engine.Step(ctx, "charge", func(ctx context.Context) (string, error) {
		if err := work(ctx, p.WorkMS); err != nil {
			return "", err
		}
		if p.Fail == "outage" && p.OutageUntil != nil && time.Now().Before(*p.OutageUntil) {
			return "", fmt.Errorf("charge order %s: payment ledger: dial tcp 10.0.0.12:5432: connection refused", p.Order)
		}
		return fmt.Sprintf("ch_%s_%d", hold, p.AmountCents), nil
	})
	if err != nil {
		return err
	}
	_, err = engine.Step(ctx, "confirm", func(ctx context.Context) (string, error) {
		return "sent confirmation of " + charge, work(ctx, p.WorkMS)
	})
	return err
}
