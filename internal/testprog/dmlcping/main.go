// Command dmlcping is a test program that stands in for a ps-lite
// binary: it reads only the DMLC_* environment contract that ps-submit
// gives every task (never a SPINDLE_* variable) and performs ps-lite's
// rendezvous over plain TCP, so that tests can show such a program runs
// unchanged under every launcher.
//
// The scheduler (DMLC_ROLE=scheduler) listens on
// DMLC_PS_ROOT_URI:DMLC_PS_ROOT_PORT and waits for the
// DMLC_NUM_SERVER+DMLC_NUM_WORKER servers and workers. Each of them dials
// the scheduler (retrying while it is not up yet) and sends one line,
//
//	ROLE RANK HOST
//
// with its DMLC_ROLE, DMLC_TASK_ID and DMLC_NODE_HOST. Once every (role,
// rank) has registered, once and within range, the scheduler answers each
// with the line "ok N", N being the number of nodes, and prints
// "scheduler: N nodes registered"; each node prints
// "ROLE RANK: registered with N nodes". All of them then exit 0.
//
// A missing or malformed variable exits 2 with a message naming it; a
// failed rendezvous exits 1. Every wait is bounded by rendezvousTimeout.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

const (
	// rendezvousTimeout bounds the scheduler's wait for every node, and
	// each node's wait to reach the scheduler and then for its answer.
	rendezvousTimeout = 2 * time.Minute
	// maxLine bounds a registration or answer line.
	maxLine = 1024
)

// The variables of the contract that dmlcping reads.
const (
	envRole      = "DMLC_ROLE"
	envRootURI   = "DMLC_PS_ROOT_URI"
	envRootPort  = "DMLC_PS_ROOT_PORT"
	envNumServer = "DMLC_NUM_SERVER"
	envNumWorker = "DMLC_NUM_WORKER"
	envNodeHost  = "DMLC_NODE_HOST"
	envTaskID    = "DMLC_TASK_ID"
)

// config is what a process learnt from its environment.
type config struct {
	role       string
	rootURI    string
	rootPort   int
	numServers int
	numWorkers int
	// rank and host: servers and workers only.
	rank int
	host string
}

// nodes is the number of nodes that register with the scheduler.
func (c config) nodes() int { return c.numServers + c.numWorkers }

// envError is a missing or malformed variable.
type envError struct {
	name, value, problem string
}

func (e *envError) Error() string {
	if e.value == "" {
		return fmt.Sprintf("%s %s", e.name, e.problem)
	}
	return fmt.Sprintf("%s=%q: %s", e.name, e.value, e.problem)
}

func main() {
	c, err := readEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, "dmlcping:", err)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), rendezvousTimeout)
	defer cancel()
	if c.role == "scheduler" {
		err = schedule(ctx, c, os.Stdout)
	} else {
		err = register(ctx, c, os.Stdout)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "dmlcping: %s: %v\n", c.role, err)
		cancel()
		os.Exit(1)
	}
}

// readEnv reads and checks the variables the process's role needs.
func readEnv() (config, error) {
	var c config
	var err error
	c.role = os.Getenv(envRole)
	switch c.role {
	case "scheduler", "server", "worker":
	case "":
		return c, &envError{name: envRole, problem: "is not set"}
	default:
		return c, &envError{name: envRole, value: c.role, problem: "want scheduler, server or worker"}
	}
	if c.rootURI, err = address(envRootURI); err != nil {
		return c, err
	}
	if c.rootPort, err = integer(envRootPort, 1, 65535); err != nil {
		return c, err
	}
	if c.numServers, err = integer(envNumServer, 0, 1<<16); err != nil {
		return c, err
	}
	if c.numWorkers, err = integer(envNumWorker, 0, 1<<16); err != nil {
		return c, err
	}
	if c.nodes() == 0 {
		return c, &envError{name: envNumServer, value: "0", problem: "and " + envNumWorker + "=0: no node to register"}
	}
	if c.role == "scheduler" {
		return c, nil
	}
	n, count := c.numWorkers, envNumWorker
	if c.role == "server" {
		n, count = c.numServers, envNumServer
	}
	if n == 0 {
		return c, &envError{name: envRole, value: c.role, problem: "the job has no " + c.role + "s (" + count + "=0)"}
	}
	if c.rank, err = integer(envTaskID, 0, n-1); err != nil {
		return c, err
	}
	if c.host, err = address(envNodeHost); err != nil {
		return c, err
	}
	return c, nil
}

// address reads a variable that must hold an IP address: ps-lite binds
// DMLC_PS_ROOT_URI (the scheduler) and DMLC_NODE_HOST (the others) with
// ZeroMQ, which binds addresses and interface names, not host names.
func address(name string) (string, error) {
	v, err := word(name)
	if err != nil {
		return "", err
	}
	if net.ParseIP(v) == nil {
		return "", &envError{name: name, value: v, problem: "not an IP address (ps-lite binds it with ZeroMQ, which takes addresses only)"}
	}
	return v, nil
}

// word reads a variable that must be set to one word.
func word(name string) (string, error) {
	v := os.Getenv(name)
	if v == "" {
		return "", &envError{name: name, problem: "is not set"}
	}
	if strings.ContainsAny(v, " \t\r\n") {
		return "", &envError{name: name, value: v, problem: "contains white space"}
	}
	return v, nil
}

// integer reads a variable that must be an integer in [lo, hi].
func integer(name string, lo, hi int) (int, error) {
	v := os.Getenv(name)
	if v == "" {
		return 0, &envError{name: name, problem: "is not set"}
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, &envError{name: name, value: v, problem: "not an integer"}
	}
	if n < lo || n > hi {
		return 0, &envError{name: name, value: v, problem: fmt.Sprintf("want %d to %d", lo, hi)}
	}
	return n, nil
}

// registration is one node's line, or why it could not be read.
type registration struct {
	conn net.Conn
	role string
	rank int
	host string
	err  error
}

// schedule listens at the root address, waits, bounded by ctx, for every
// node, checks that they are the job's, answers each and reports.
func schedule(ctx context.Context, c config, out io.Writer) error {
	addr := net.JoinHostPort(c.rootURI, strconv.Itoa(c.rootPort))
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s (%s=%s): %w", addr, envRootURI, c.rootURI, err)
	}
	defer ln.Close()
	fmt.Fprintf(out, "scheduler: listening on %s, waiting for %d nodes\n", addr, c.nodes())

	// Each accepted connection's line is read in its own goroutine, so
	// that one slow node does not hold up the others.
	regs := make(chan registration)
	acceptErr := make(chan error, 1)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				acceptErr <- err
				return
			}
			go func() {
				r := readRegistration(ctx, conn)
				select {
				case regs <- r:
				case <-ctx.Done():
					conn.Close()
				}
			}()
		}
	}()

	var conns []net.Conn
	defer func() {
		for _, conn := range conns {
			conn.Close()
		}
	}()
	seen := map[string]string{} // "role rank" -> host
	for len(seen) < c.nodes() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d nodes registered within %v: %v", len(seen), c.nodes(), rendezvousTimeout, context.Cause(ctx))
		case err := <-acceptErr:
			return fmt.Errorf("accept: %w", err)
		case r := <-regs:
			if r.err != nil {
				if r.conn != nil {
					r.conn.Close()
				}
				if errors.Is(r.err, io.EOF) {
					// A connection that said nothing (a port probe) is
					// not a node.
					fmt.Fprintf(os.Stderr, "dmlcping: scheduler: ignoring a connection that sent nothing\n")
					continue
				}
				return r.err
			}
			conns = append(conns, r.conn)
			n := c.numWorkers
			if r.role == "server" {
				n = c.numServers
			}
			if r.rank >= n {
				return fmt.Errorf("%s %d (on %s) registered, but the job has %d %ss", r.role, r.rank, r.host, n, r.role)
			}
			key := r.role + " " + strconv.Itoa(r.rank)
			if prev, dup := seen[key]; dup {
				return fmt.Errorf("%s registered twice: from %s and from %s", key, prev, r.host)
			}
			seen[key] = r.host
			fmt.Fprintf(out, "scheduler: %s on %s registered\n", key, r.host)
		}
	}
	ln.Close()
	answer := []byte("ok " + strconv.Itoa(c.nodes()) + "\n")
	deadline, _ := ctx.Deadline()
	for _, conn := range conns {
		if err := conn.SetWriteDeadline(deadline); err != nil {
			return err
		}
		if _, err := conn.Write(answer); err != nil {
			return fmt.Errorf("answer %s: %w", conn.RemoteAddr(), err)
		}
	}
	fmt.Fprintf(out, "scheduler: %d nodes registered\n", c.nodes())
	return nil
}

// readRegistration reads and parses one node's line from conn, bounded
// by ctx.
func readRegistration(ctx context.Context, conn net.Conn) registration {
	r := registration{conn: conn}
	if deadline, ok := ctx.Deadline(); ok {
		if err := conn.SetReadDeadline(deadline); err != nil {
			r.err = err
			return r
		}
	}
	line, err := readLine(conn)
	if err != nil {
		if errors.Is(err, io.EOF) && line == "" {
			r.err = io.EOF
		} else {
			r.err = fmt.Errorf("read a registration from %s: %w", conn.RemoteAddr(), err)
		}
		return r
	}
	f := strings.Fields(line)
	bad := func(why string) registration {
		r.err = fmt.Errorf("malformed registration %q from %s: %s; want \"ROLE RANK HOST\"", line, conn.RemoteAddr(), why)
		return r
	}
	if len(f) != 3 {
		return bad("not three fields")
	}
	if f[0] != "server" && f[0] != "worker" {
		return bad("the role is neither server nor worker")
	}
	rank, err := strconv.Atoi(f[1])
	if err != nil || rank < 0 {
		return bad("the rank is not a non-negative integer")
	}
	r.role, r.rank, r.host = f[0], rank, f[2]
	return r
}

// readLine reads one line of at most maxLine bytes, without its end.
func readLine(rd io.Reader) (string, error) {
	br := bufio.NewReaderSize(io.LimitReader(rd, maxLine+1), maxLine+1)
	line, err := br.ReadString('\n')
	if err != nil {
		if errors.Is(err, io.EOF) && len(line) > maxLine {
			return "", fmt.Errorf("line longer than %d bytes", maxLine)
		}
		return line, err
	}
	return strings.TrimRight(line, "\r\n"), nil
}

// register dials the scheduler, retrying with backoff while it is not up
// yet, sends this node's line and waits for the answer, all bounded by
// ctx.
func register(ctx context.Context, c config, out io.Writer) error {
	addr := net.JoinHostPort(c.rootURI, strconv.Itoa(c.rootPort))
	var d net.Dialer
	backoff := 50 * time.Millisecond
	var conn net.Conn
	for attempt := 1; ; attempt++ {
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		var err error
		conn, err = d.DialContext(dctx, "tcp", addr)
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("no scheduler at %s after %d attempts in %v: %v", addr, attempt, rendezvousTimeout, err)
		}
		retry := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			retry.Stop()
			return fmt.Errorf("no scheduler at %s after %d attempts in %v: %v", addr, attempt, rendezvousTimeout, err)
		case <-retry.C:
		}
		backoff = min(2*backoff, 2*time.Second)
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		if err := conn.SetDeadline(deadline); err != nil {
			return err
		}
	}
	if _, err := fmt.Fprintf(conn, "%s %d %s\n", c.role, c.rank, c.host); err != nil {
		return fmt.Errorf("register with the scheduler at %s: %w", addr, err)
	}
	line, err := readLine(conn)
	if err != nil {
		return fmt.Errorf("wait for the scheduler at %s to answer: %w", addr, err)
	}
	f := strings.Fields(line)
	if len(f) != 2 || f[0] != "ok" {
		return fmt.Errorf("the scheduler at %s answered %q, want \"ok N\"", addr, line)
	}
	n, err := strconv.Atoi(f[1])
	if err != nil || n != c.nodes() {
		return fmt.Errorf("the scheduler at %s answered %q, want \"ok %d\" (%s+%s)", addr, line, c.nodes(), envNumServer, envNumWorker)
	}
	fmt.Fprintf(out, "%s %d: registered with %d nodes\n", c.role, c.rank, n)
	return nil
}
