package postgres_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/postgres"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/sluicetype"
)

// Enqueue a job in the same transaction as the application's own write:
// the job exists if and only if the order was stored. It needs the
// PostgreSQL server of SLUICE_TEST_POSTGRES (or the default below).
func ExampleEnqueueTx() {
	ctx := context.Background()
	url := os.Getenv("SLUICE_TEST_POSTGRES")
	if url == "" {
		url = "postgres://root@127.0.0.1:5432/test?sslmode=disable"
	}
	store, err := postgres.Open(ctx, url+"&schema=example_enqueuetx", postgres.Options{Migrate: true})
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		store.Pool().Exec(ctx, `DROP SCHEMA example_enqueuetx CASCADE`)
		store.Close()
	}()
	e, err := engine.New(store, engine.Config{})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := store.Pool().Exec(ctx, `CREATE TABLE IF NOT EXISTS example_enqueuetx.orders (id text PRIMARY KEY)`); err != nil {
		log.Fatal(err)
	}

	placeOrder := func(id string, fail bool) error {
		return pgx.BeginFunc(ctx, store.Pool(), func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO example_enqueuetx.orders (id) VALUES ($1)`, id); err != nil {
				return err
			}
			if _, err := postgres.EnqueueTx(ctx, e, tx, sluicetype.EnqueueParams{
				ID: "receipt-" + id, Queue: "mail", Kind: "receipt.send", Args: map[string]string{"order": id},
			}); err != nil {
				return err
			}
			if fail {
				return fmt.Errorf("payment declined") // rolls back the order and the job
			}
			return nil
		})
	}
	fmt.Println("order 1:", placeOrder("1", false))
	fmt.Println("order 2:", placeOrder("2", true))

	for _, id := range []string{"receipt-1", "receipt-2"} {
		j, err := store.JobGetByID(ctx, &backend.JobGetByIDParams{ID: id})
		if err != nil {
			fmt.Println(id+":", "none")
			continue
		}
		fmt.Println(id+":", j.State)
	}
	// Output:
	// order 1: <nil>
	// order 2: payment declined
	// receipt-1: available
	// receipt-2: none
}
