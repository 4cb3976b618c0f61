package postgres_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/backend/postgres"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/sluicetype"
)

// Open the store on the pool the program has already: the store lives in
// its own schema of the program's database, and the pool stays the
// program's, open after the store's Close. It needs the PostgreSQL server
// of SLUICE_TEST_POSTGRES (or the default below).
func ExampleOpenPool() {
	ctx := context.Background()
	url := os.Getenv("SLUICE_TEST_POSTGRES")
	if url == "" {
		url = "postgres://root@127.0.0.1:5432/test?sslmode=disable"
	}
	pool, err := pgxpool.New(ctx, url) // the program's pool
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	store, err := postgres.OpenPool(ctx, pool, postgres.Options{Schema: "example_openpool", Migrate: true})
	if err != nil {
		log.Fatal(err)
	}
	e, err := engine.New(store, engine.Config{})
	if err != nil {
		log.Fatal(err)
	}
	j, err := e.Enqueue(ctx, sluicetype.EnqueueParams{Queue: "mail", Kind: "welcome.send", Args: map[string]string{"user": "42"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("job:", j.State)
	store.Close()

	var n int
	err = pool.QueryRow(ctx, `SELECT count(*) FROM example_openpool.jobs`).Scan(&n)
	fmt.Println("jobs, read on the pool after Close:", n, err)
	if _, err := pool.Exec(ctx, `DROP SCHEMA example_openpool CASCADE`); err != nil {
		log.Fatal(err)
	}
	// Output:
	// job: available
	// jobs, read on the pool after Close: 1 <nil>
}
