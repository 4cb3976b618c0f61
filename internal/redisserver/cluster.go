package redisserver

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Cluster returns the redis+cluster:// URL of a Redis Cluster for the
// cluster tests: SLUICE_TEST_REDIS_CLUSTER when set, else a private
// cluster of three masters started on free loopback ports (redis-server
// --cluster-enabled yes three times and redis-cli --cluster create), shut
// down when tb ends. Without redis-server and redis-cli the test fails
// when CI is set and is skipped (saying so) otherwise.
func Cluster(tb testing.TB) string {
	tb.Helper()
	if u := os.Getenv("SLUICE_TEST_REDIS_CLUSTER"); u != "" {
		return u
	}
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			if os.Getenv("CI") != "" {
				tb.Fatalf("redisserver: %s not found (CI is set, so this fails)", bin)
			}
			tb.Skipf("SKIP: %s not found and SLUICE_TEST_REDIS_CLUSTER unset: no cluster to test on", bin)
		}
	}
	dir := tb.TempDir()
	var addrs []string
	for i := range 3 {
		port := freePort(tb)
		nd := filepath.Join(dir, strconv.Itoa(i))
		if err := os.Mkdir(nd, 0o700); err != nil {
			tb.Fatal(err)
		}
		cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(nd, "nodes.conf"),
			"--dir", nd, "--save", "", "--appendonly", "no", "--logfile", filepath.Join(nd, "redis.log"))
		if err := cmd.Start(); err != nil {
			tb.Fatalf("redisserver: start redis-server: %v", err)
		}
		tb.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
		})
		addr := "127.0.0.1:" + strconv.Itoa(port)
		waitPing(tb, addr)
		addrs = append(addrs, addr)
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		tb.Fatalf("redisserver: redis-cli --cluster create: %v\n%s", err, out)
	}
	// Every node must know every slot before the tests route to it.
	deadline := time.Now().Add(time.Minute)
	for _, a := range addrs {
		c := goredis.NewClient(&goredis.Options{Addr: a})
		for {
			info, err := c.ClusterInfo(context.Background()).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				c.Close()
				tb.Fatalf("redisserver: cluster node %s not ready: %v %s", a, err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
		c.Close()
	}
	return "redis+cluster://" + strings.Join(addrs, ",")
}

// freePort finds a loopback port free for a node and for its cluster bus
// (the port plus 10000).
func freePort(tb testing.TB) int {
	tb.Helper()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if port+10000 > 65535 {
			continue
		}
		if b, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port+10000)); err == nil {
			b.Close()
			return port
		}
	}
	tb.Fatal("redisserver: no free port pair for a cluster node")
	return 0
}

func waitPing(tb testing.TB, addr string) {
	tb.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	defer c.Close()
	deadline := time.Now().Add(30 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			tb.Fatalf("redisserver: redis-server on %s did not answer", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
