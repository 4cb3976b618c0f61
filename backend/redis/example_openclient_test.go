package redis_test

import (
	"context"
	"fmt"
	"log"
	"os"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/backend/redis"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/sluicetype"
)

// Open the store on the client the program has already: the store lives
// in its own namespace (every key under {example_openclient}:), and the
// client stays the program's, open after the store's Close. It needs the
// Redis server of SLUICE_TEST_REDIS (or the default below).
func ExampleOpenClient() {
	ctx := context.Background()
	url := os.Getenv("SLUICE_TEST_REDIS")
	if url == "" {
		url = "redis://127.0.0.1:6379/0"
	}
	o, err := goredis.ParseURL(url)
	if err != nil {
		log.Fatal(err)
	}
	o.MaxRetries = -1              // a script is never sent twice (see OpenClient)
	client := goredis.NewClient(o) // the program's client
	defer client.Close()

	store, err := redis.OpenClient(ctx, client, redis.Options{Namespace: "example_openclient", Migrate: true})
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

	keys, err := client.Keys(ctx, "{example_openclient}:*").Result()
	fmt.Println("namespace read on the client after Close:", len(keys) > 0, err)
	if err := client.Del(ctx, keys...).Err(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// job: available
	// namespace read on the client after Close: true <nil>
}
