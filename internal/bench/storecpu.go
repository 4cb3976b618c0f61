package main

// The CPU a store spends in its own processes, so that a scenario can say
// how much of a job's cost is the engine's and how much the store server's.
//
// PostgreSQL: the backend processes serving this process's connections,
// found by their client port (a backend's process title names it:
// "postgres: root test 127.0.0.1(45678) idle"), their utime+stime read
// from /proc. Only TCP connections on this machine can be matched, and a
// backend whose connection closed before the end sample is not counted.
//
// Redis: the server's used_cpu_user+used_cpu_sys from INFO cpu. That is
// the whole server's: other clients of a shared server are counted too.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// errNoStoreCPU: the store runs in this process, or its server cannot be
// measured from here.
var errNoStoreCPU = errors.New("store CPU not measurable")

// storeCPU reads a store server's CPU time so far.
type storeCPU interface {
	// source names what is measured, for the result line.
	source() string
	// snapshot is the CPU time by process (one entry "" for a server
	// measured as a whole).
	snapshot(ctx context.Context) (map[string]time.Duration, error)
}

// storeCPUFor returns the sampler for a store URL of backend, or
// errNoStoreCPU for a store in this process (SQLite).
func storeCPUFor(backend, rawURL string) (storeCPU, error) {
	switch backend {
	case "postgres":
		u, err := url.Parse(rawURL)
		if err != nil {
			return nil, fmt.Errorf("store cpu: %w", err)
		}
		port := u.Port()
		if port == "" {
			port = "5432"
		}
		p, err := strconv.Atoi(port)
		if err != nil {
			return nil, fmt.Errorf("store cpu: port %q: %w", port, err)
		}
		return pgBackendCPU{serverPort: p, proc: "/proc"}, nil
	case "redis":
		u, err := url.Parse(rawURL)
		if err != nil {
			return nil, fmt.Errorf("store cpu: %w", err)
		}
		if u.Scheme == "rediss" {
			return nil, fmt.Errorf("%w: INFO over TLS is not supported here", errNoStoreCPU)
		}
		host := u.Host
		if u.Port() == "" {
			host = net.JoinHostPort(u.Hostname(), "6379")
		}
		pass, _ := u.User.Password()
		return redisInfoCPU{addr: host, user: u.User.Username(), pass: pass}, nil
	}
	return nil, errNoStoreCPU
}

// cpuDelta is the CPU spent between two snapshots: per process, what it
// gained (all of it for a process born in between).
func cpuDelta(before, after map[string]time.Duration) time.Duration {
	var d time.Duration
	for k, v := range after {
		if v > before[k] {
			d += v - before[k]
		}
	}
	return d
}

// pgBackendCPU measures the PostgreSQL backends of this process's
// connections to serverPort.
type pgBackendCPU struct {
	serverPort int
	proc       string // /proc
}

func (pgBackendCPU) source() string { return "pg_backends" }

func (p pgBackendCPU) snapshot(context.Context) (map[string]time.Duration, error) {
	ports, err := ownClientPorts(p.proc, p.serverPort)
	if err != nil {
		return nil, err
	}
	out := map[string]time.Duration{}
	if len(ports) == 0 {
		return out, nil
	}
	dirs, err := os.ReadDir(p.proc)
	if err != nil {
		return nil, fmt.Errorf("store cpu: %w", err)
	}
	for _, d := range dirs {
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join(p.proc, d.Name(), "cmdline"))
		if err != nil {
			continue // gone, or not ours to read
		}
		port, ok := pgClientPort(string(cmd))
		if !ok || !ports[port] {
			continue
		}
		stat, err := os.ReadFile(filepath.Join(p.proc, d.Name(), "stat"))
		if err != nil {
			continue
		}
		if cpu, ok := parseStatCPU(string(stat)); ok {
			out[d.Name()] = cpu
		}
	}
	return out, nil
}

// pgClientPort reads the client port from a PostgreSQL backend's process
// title: "postgres: USER DB HOST(PORT) STATE".
func pgClientPort(cmdline string) (int, bool) {
	title := strings.TrimRight(strings.ReplaceAll(cmdline, "\x00", " "), " ")
	rest, ok := strings.CutPrefix(title, "postgres: ")
	if !ok {
		return 0, false
	}
	open := strings.IndexByte(rest, '(')
	if open < 0 {
		return 0, false
	}
	end := strings.IndexByte(rest[open:], ')')
	if end < 0 {
		return 0, false
	}
	port, err := strconv.Atoi(rest[open+1 : open+end])
	return port, err == nil
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times; 100 on
// Linux on every architecture Go supports.
const clockTicks = 100

// parseStatCPU reads utime+stime from a /proc/PID/stat line.
func parseStatCPU(stat string) (time.Duration, bool) {
	// The command (field 2) may hold spaces and parentheses: fields are
	// counted from after its last ')'.
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(ut+st) * time.Second / clockTicks, true
}

// ownClientPorts lists the local ports of this process's TCP connections
// to remotePort.
func ownClientPorts(proc string, remotePort int) (map[int]bool, error) {
	inodes := map[string]bool{}
	fds, err := os.ReadDir(filepath.Join(proc, "self", "fd"))
	if err != nil {
		return nil, fmt.Errorf("store cpu: %w", err)
	}
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join(proc, "self", "fd", fd.Name()))
		if err != nil {
			continue
		}
		if ino, ok := strings.CutPrefix(link, "socket:["); ok {
			inodes[strings.TrimSuffix(ino, "]")] = true
		}
	}
	ports := map[int]bool{}
	for _, name := range []string{"tcp", "tcp6"} {
		f, err := os.Open(filepath.Join(proc, "self", "net", name))
		if err != nil {
			continue // no IPv6, say
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if local, remote, ino, ok := parseNetTCP(sc.Text()); ok && remote == remotePort && inodes[ino] {
				ports[local] = true
			}
		}
		f.Close()
	}
	return ports, nil
}

// parseNetTCP reads the local port, remote port and inode of one line of
// /proc/net/tcp (or tcp6); ok is false for the header.
func parseNetTCP(line string) (local, remote int, inode string, ok bool) {
	f := strings.Fields(line)
	if len(f) < 10 || f[0] == "sl" {
		return 0, 0, "", false
	}
	port := func(addr string) (int, bool) {
		_, hex, found := strings.Cut(addr, ":")
		if !found {
			return 0, false
		}
		p, err := strconv.ParseUint(hex, 16, 16)
		return int(p), err == nil
	}
	l, ok1 := port(f[1])
	r, ok2 := port(f[2])
	if !ok1 || !ok2 {
		return 0, 0, "", false
	}
	return l, r, f[9], true
}

// redisInfoCPU measures a Redis server as a whole through INFO cpu.
type redisInfoCPU struct {
	addr, user, pass string
}

func (redisInfoCPU) source() string { return "redis_info" }

func (r redisInfoCPU) snapshot(ctx context.Context) (map[string]time.Duration, error) {
	var d net.Dialer
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", r.addr)
	if err != nil {
		return nil, fmt.Errorf("store cpu: %w", err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	br := bufio.NewReader(c)
	if r.pass != "" {
		args := []string{"AUTH", r.pass}
		if r.user != "" {
			args = []string{"AUTH", r.user, r.pass}
		}
		if _, err := redisCommand(c, br, args...); err != nil {
			return nil, err
		}
	}
	info, err := redisCommand(c, br, "INFO", "cpu")
	if err != nil {
		return nil, err
	}
	cpu, err := parseRedisCPU(info)
	if err != nil {
		return nil, err
	}
	return map[string]time.Duration{"": cpu}, nil
}

// redisCommand sends one command and reads a simple-string or bulk reply.
func redisCommand(w net.Conn, br *bufio.Reader, args ...string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := w.Write([]byte(b.String())); err != nil {
		return "", fmt.Errorf("store cpu: %w", err)
	}
	line, err := br.ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("store cpu: %w", err)
	}
	line = strings.TrimRight(line, "\r\n")
	switch {
	case strings.HasPrefix(line, "+"):
		return line[1:], nil
	case strings.HasPrefix(line, "-"):
		return "", fmt.Errorf("store cpu: redis: %s", line[1:])
	case strings.HasPrefix(line, "$"):
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("store cpu: redis reply %q", line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(br, buf); err != nil {
			return "", fmt.Errorf("store cpu: %w", err)
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("store cpu: redis reply %q", line)
}

// parseRedisCPU sums used_cpu_user and used_cpu_sys (seconds) of INFO cpu.
func parseRedisCPU(info string) (time.Duration, error) {
	var total float64
	found := 0
	for line := range strings.SplitSeq(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (k != "used_cpu_user" && k != "used_cpu_sys") {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("store cpu: INFO %s: %w", k, err)
		}
		total += f
		found++
	}
	if found != 2 {
		return 0, fmt.Errorf("store cpu: INFO cpu without used_cpu_user and used_cpu_sys")
	}
	return time.Duration(total * float64(time.Second)), nil
}

// load1 is the machine's 1-minute load average, or -1.
func load1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}
