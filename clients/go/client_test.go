package idcar_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	idcar "github.com/idcar/idcar/clients/go"
)

// ---- the server under test ----

// idcarBin is the server binary; the tests fail (never skip) without it.
func idcarBin(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("IDCAR_BIN")
	if bin == "" {
		t.Fatal("IDCAR_BIN is not set: set it to the idcar binary, e.g. IDCAR_BIN=/path/to/target/debug/idcar go test ./...")
	}
	return bin
}

// server is an `idcar serve` process in a temporary directory.
type server struct {
	t      *testing.T
	bin    string
	dir    string
	sock   string
	args   []string
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // Wait's result, once exited is closed
}

// startServer starts `$IDCAR_BIN serve` with the layout and extra flags and waits (at most
// 10 s) until it answers a describe request; it is stopped when the test ends.
func startServer(t *testing.T, layout string, extra ...string) *server {
	t.Helper()
	s := newServer(idcarBin(t), t.TempDir(), layout, extra...)
	s.t = t
	t.Cleanup(s.stop)
	s.start()
	return s
}

// newServer prepares (does not start) `$IDCAR_BIN serve` of the layout in dir.
func newServer(bin, dir, layout string, extra ...string) *server {
	s := &server{bin: bin, dir: dir, sock: filepath.Join(dir, "s.sock")}
	s.args = append([]string{"serve", "--socket", s.sock, "--state-file", filepath.Join(dir, "state"),
		"--admin-addr", "none", "--log", "warn", "--layout", layout}, extra...)
	return s
}

func (s *server) start() {
	s.t.Helper()
	if err := s.launch(); err != nil {
		s.t.Fatal(err)
	}
}

// launch starts the process and waits (at most 10 s) until it answers a describe request.
func (s *server) launch() error {
	logf, err := os.OpenFile(filepath.Join(s.dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.bin, s.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	err = cmd.Start()
	logf.Close()
	if err != nil {
		return fmt.Errorf("cannot start %s: %v", s.bin, err)
	}
	s.cmd, s.exited = cmd, make(chan struct{})
	exited := s.exited
	go func() { s.err = cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(10 * time.Second)
	for !describes(s.sock) {
		select {
		case <-exited:
			return fmt.Errorf("idcar serve exited (%v) before answering:\n%s", s.err, s.log())
		default:
		}
		if time.Now().After(deadline) {
			s.stop()
			return fmt.Errorf("idcar serve did not answer a describe request within 10 s:\n%s", s.log())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// stop sends SIGTERM and waits for the exit (SIGKILL after 10 s).
func (s *server) stop() {
	if s.cmd == nil {
		return
	}
	cmd := s.cmd
	s.cmd = nil
	select {
	case <-s.exited:
		return
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-s.exited
	}
}

func (s *server) log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
	return string(b)
}

// describes reports whether a describe request on sock is answered with status 0.
func describes(sock string) bool {
	c, err := net.DialTimeout("unix", sock, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte{0xd1, 0x02, 0, 0}); err != nil {
		return false
	}
	var h [8]byte
	if _, err := io.ReadFull(c, h[:]); err != nil {
		return false
	}
	return h[0] == 0xd1 && h[1] == 0
}

func dial(t *testing.T, opts idcar.Options) *idcar.Client {
	t.Helper()
	c, err := idcar.Dial(opts)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func bounded(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// uniq collects IDs and reports duplicates.
type uniq struct {
	mu   sync.Mutex
	seen map[string]bool
	dups []string
}

func (u *uniq) add(ids ...idcar.ID) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.seen == nil {
		u.seen = map[string]bool{}
	}
	for _, id := range ids {
		k := string(id.Bytes())
		if u.seen[k] {
			u.dups = append(u.dups, id.String())
		}
		u.seen[k] = true
	}
}

func (u *uniq) check(t *testing.T, want int) {
	t.Helper()
	if len(u.dups) > 0 {
		t.Fatalf("%d IDs handed out twice, e.g. %s", len(u.dups), u.dups[0])
	}
	if len(u.seen) != want {
		t.Fatalf("%d unique IDs, want %d", len(u.seen), want)
	}
}

// ---- tests against a real server ----

func TestUniqueAcrossGoroutines(t *testing.T) {
	s := startServer(t, "lable64")
	for _, prefetch := range []int{0, 64, 2500} {
		t.Run(fmt.Sprintf("prefetch=%d", prefetch), func(t *testing.T) {
			c := dial(t, idcar.Options{Socket: s.sock, Prefetch: prefetch})
			ctx := bounded(t, 60*time.Second)
			const workers, nexts, batch = 8, 300, 100
			var u uniq
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			for w := 0; w < workers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					got := make([]idcar.ID, 0, nexts+batch)
					for i := 0; i < nexts; i++ {
						id, err := c.Next(ctx)
						if err != nil {
							errs <- err
							return
						}
						got = append(got, id)
					}
					ids, err := c.IDs(ctx, batch)
					if err != nil {
						errs <- err
						return
					}
					u.add(append(got, ids...)...)
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			big, err := c.IDs(ctx, 2500) // three requests
			if err != nil || len(big) != 2500 {
				t.Fatalf("IDs(2500) = %d IDs, %v", len(big), err)
			}
			u.add(big...)
			u.check(t, workers*(nexts+batch)+2500)
		})
	}
}

func TestServerRestartMidStream(t *testing.T) {
	s := startServer(t, "lable64")
	c := dial(t, idcar.Options{Socket: s.sock, RetryDeadline: 15 * time.Second})
	ctx := bounded(t, 60*time.Second)
	var u uniq
	take := func() {
		t.Helper()
		ids, err := c.IDs(ctx, 300)
		if err != nil {
			t.Fatal(err)
		}
		u.add(ids...)
		for i := 0; i < 20; i++ {
			id, err := c.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			u.add(id)
		}
	}
	take()
	s.stop()
	// A call made while the server is down is retried until it is back.
	type result struct {
		ids []idcar.ID
		err error
	}
	during := make(chan result, 1)
	go func() {
		ids, err := c.IDs(ctx, 100)
		during <- result{ids, err}
	}()
	time.Sleep(300 * time.Millisecond)
	s.start()
	select {
	case r := <-during:
		if r.err != nil {
			t.Fatalf("call during the restart: %v", r.err)
		}
		u.add(r.ids...)
	case <-time.After(30 * time.Second):
		t.Fatal("call during the restart did not return in 30 s")
	}
	take()
	s.stop()
	s.start()
	take() // idle connections broke: replaced at once
	u.check(t, 3*320+100)
}

func TestUnavailableRetriedUntilDeadline(t *testing.T) {
	s := startServer(t, "lable64", "--zk", "127.0.0.1:1", "--zk-session-timeout", "2s")
	ctx := bounded(t, 60*time.Second)
	check := func(t *testing.T, err error, el, min, max time.Duration) {
		t.Helper()
		if err == nil {
			t.Fatal("no error from a server without a lease")
		}
		if !errors.Is(err, idcar.ErrUnavailable) {
			t.Fatalf("error %q is not ErrUnavailable", err)
		}
		var se *idcar.ServerError
		if !errors.As(err, &se) || se.Reason == "" || !strings.Contains(err.Error(), se.Reason) {
			t.Fatalf("error %q does not carry the server's reason", err)
		}
		if !strings.Contains(err.Error(), "no lease is held") {
			t.Fatalf("error %q lacks the server's reason \"no lease is held\"", err)
		}
		if el < min || el >= max {
			t.Fatalf("error after %v, want [%v, %v)", el, min, max)
		}
	}
	t.Run("deadline", func(t *testing.T) {
		c := dial(t, idcar.Options{Socket: s.sock, RetryDeadline: time.Second})
		start := time.Now()
		_, err := c.Next(ctx)
		check(t, err, time.Since(start), time.Second, 10*time.Second)
	})
	t.Run("prefetch", func(t *testing.T) {
		c := dial(t, idcar.Options{Socket: s.sock, RetryDeadline: time.Second, Prefetch: 10})
		start := time.Now()
		_, err := c.Next(ctx)
		check(t, err, time.Since(start), time.Second, 10*time.Second)
	})
	t.Run("no-retry", func(t *testing.T) {
		c := dial(t, idcar.Options{Socket: s.sock, RetryDeadline: idcar.NoRetry})
		start := time.Now()
		_, err := c.IDs(ctx, 5)
		check(t, err, time.Since(start), 0, time.Second)
	})
}

func TestMissingSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing.sock")
	check := func(t *testing.T, err error, el, max time.Duration, errno error) {
		t.Helper()
		if err == nil {
			t.Fatal("Dial succeeded on a missing socket")
		}
		if !strings.Contains(err.Error(), path) {
			t.Fatalf("error %q does not name %s", err, path)
		}
		var se *idcar.SocketError
		if !errors.As(err, &se) || se.Op != "connect" || se.Socket != path {
			t.Fatalf("error %q is not a connect SocketError", err)
		}
		if !errors.Is(err, errno) {
			t.Fatalf("error %q is not %v", err, errno)
		}
		if el >= max {
			t.Fatalf("error after %v, want < %v", el, max)
		}
	}
	t.Run("retried", func(t *testing.T) {
		start := time.Now()
		_, err := idcar.Dial(idcar.Options{Socket: path, RetryDeadline: 300 * time.Millisecond})
		el := time.Since(start)
		check(t, err, el, 3*time.Second, syscall.ENOENT)
		if el < 300*time.Millisecond {
			t.Fatalf("gave up after %v, before the retry deadline", el)
		}
	})
	t.Run("no-retry", func(t *testing.T) {
		start := time.Now()
		_, err := idcar.Dial(idcar.Options{Socket: path, RetryDeadline: idcar.NoRetry})
		check(t, err, time.Since(start), time.Second, syscall.ENOENT)
	})
	t.Run("env", func(t *testing.T) {
		t.Setenv("IDCAR_SOCKET", path)
		start := time.Now()
		_, err := idcar.Dial(idcar.Options{RetryDeadline: idcar.NoRetry})
		check(t, err, time.Since(start), time.Second, syscall.ENOENT)
	})
	t.Run("refused", func(t *testing.T) {
		ln, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		ln.(*net.UnixListener).SetUnlinkOnClose(false)
		ln.Close() // the socket file stays; nobody listens
		defer os.Remove(path)
		start := time.Now()
		_, err = idcar.Dial(idcar.Options{Socket: path, RetryDeadline: idcar.NoRetry})
		check(t, err, time.Since(start), time.Second, syscall.ECONNREFUSED)
	})
}

func TestMissingDirectoryFailsAtOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nodir")
	path := filepath.Join(dir, "idcar.sock")
	start := time.Now()
	_, err := idcar.Dial(idcar.Options{Socket: path, RetryDeadline: 5 * time.Second})
	if el := time.Since(start); el >= time.Second {
		t.Fatalf("retried a directory that cannot appear: %v", el)
	}
	var nd *idcar.NoDirError
	if err == nil || !errors.As(err, &nd) || nd.Dir != dir {
		t.Fatalf("error %v is not a NoDirError for %s", err, dir)
	}
	if want := "directory " + dir + " does not exist"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not say %q", err, want)
	}
	if !errors.Is(err, syscall.ENOENT) || !strings.Contains(err.Error(), path) {
		t.Fatalf("error %q does not name %s or wrap ENOENT", err, path)
	}
}

// A fake lable64 server that issues 1, 2, 3, ... in the order requests arrive and answers
// each 30 ms late: a prefetch refill is in flight whenever the buffer runs dry.
func slowCounter(t *testing.T) string {
	var mu sync.Mutex
	next := uint64(1)
	return fakeServer(t, afterDescribe(func(count uint32) []byte {
		mu.Lock()
		first := next
		next += uint64(count)
		mu.Unlock()
		time.Sleep(30 * time.Millisecond)
		out := make([]byte, 8*int(count))
		for i := 0; i < int(count); i++ {
			binary.BigEndian.PutUint64(out[8*i:], first+uint64(i))
		}
		return frame(0, 8, out)
	}))
}

func TestPrefetchKeepsIssueOrder(t *testing.T) {
	ctx := bounded(t, 60*time.Second)
	c := dial(t, idcar.Options{Socket: slowCounter(t), Prefetch: 20})
	var last uint64
	increasing := func(what string, ids ...idcar.ID) {
		t.Helper()
		for _, id := range ids {
			v, _ := id.Uint64()
			if v <= last {
				t.Fatalf("%s: %d after %d, out of issue order", what, v, last)
			}
			last = v
		}
	}
	for i := 0; i < 100; i++ {
		id, err := c.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		increasing("Next", id)
	}
	for i := 0; i < 10; i++ {
		ids, err := c.IDs(ctx, 7)
		if err != nil || len(ids) != 7 {
			t.Fatalf("IDs(7): %d IDs, %v", len(ids), err)
		}
		increasing("IDs(7)", ids...)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine uint64
			for i := 0; i < 50; i++ {
				id, err := c.Next(ctx)
				if err != nil {
					errs <- err
					return
				}
				v, _ := id.Uint64()
				if v <= mine {
					errs <- fmt.Errorf("a goroutine got %d after %d", v, mine)
					return
				}
				mine = v
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestDecodeMatchesCLI(t *testing.T) {
	bin := idcarBin(t)
	for _, tc := range []struct {
		layout string
		width  int
		extra  []string
	}{
		{"lable64", 8, nil},
		{"ugd60", 8, nil},
		{"si53", 8, []string{"--mid-bits", "3"}},
		{"sno80", 10, nil},
		{"muid128", 16, nil},
		{"uuid7", 16, nil},
	} {
		tc := tc
		t.Run(tc.layout, func(t *testing.T) {
			s := startServer(t, tc.layout, tc.extra...)
			c := dial(t, idcar.Options{Socket: s.sock})
			ctx := bounded(t, 60*time.Second)
			d := c.Layout()
			if d.Layout != tc.layout || d.Width != tc.width {
				t.Fatalf("Layout() = %+v", d)
			}
			if tc.layout == "si53" && d.Params["mid-bits"] != "3" {
				t.Fatalf("si53 params %v, want mid-bits 3", d.Params)
			}
			ids, err := c.IDs(ctx, 3)
			if err != nil {
				t.Fatal(err)
			}
			id, err := c.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range append(ids, id) {
				text := id.String()
				args := append(append([]string{"decode", "--layout", tc.layout}, tc.extra...), "--json", text)
				out, err := exec.CommandContext(ctx, bin, args...).Output()
				if err != nil {
					t.Fatalf("idcar %s: %v", strings.Join(args, " "), err)
				}
				got, err := id.Decode()
				if err != nil {
					t.Fatalf("Decode(%s): %v", text, err)
				}
				sameFields(t, text, got, out)
				back, err := idcar.Parse(d, text)
				if err != nil || !bytes.Equal(back.Bytes(), id.Bytes()) {
					t.Fatalf("Parse(%s) = %x, %v; want %x", text, back.Bytes(), err, id.Bytes())
				}
				if _, ok := id.Uint64(); ok != (tc.width == 8) {
					t.Fatalf("Uint64 ok = %v for %s", ok, tc.layout)
				}
				u, ok := id.UUID()
				if ok != (tc.layout == "uuid7") {
					t.Fatalf("UUID ok = %v for %s", ok, tc.layout)
				}
				if ok && (u.String() != text || !bytes.Equal(u[:], id.Bytes())) {
					t.Fatalf("UUID() = %s (% x), want %s (% x)", u, u[:], text, id.Bytes())
				}
			}
			v, err := c.Uint64(ctx)
			if tc.width == 8 && (err != nil || v == 0) {
				t.Fatalf("Uint64() = %d, %v", v, err)
			}
			if tc.width != 8 && !errors.Is(err, idcar.ErrNotUint64) {
				t.Fatalf("Uint64() on %s: %v, want ErrNotUint64", tc.layout, err)
			}
		})
	}
}

// sameFields compares Decode's map with `idcar decode --json` output: the same keys, the
// same strings, the same numbers (compared as decimal text).
func sameFields(t *testing.T, text string, got map[string]any, cli []byte) {
	t.Helper()
	var want map[string]any
	dec := json.NewDecoder(bytes.NewReader(cli))
	dec.UseNumber()
	if err := dec.Decode(&want); err != nil {
		t.Fatalf("%s: idcar decode printed %q: %v", text, cli, err)
	}
	if len(got) != len(want) {
		t.Errorf("%s: Decode has keys %v, idcar decode %v", text, keys(got), keys(want))
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("%s: Decode lacks %q", text, k)
			continue
		}
		switch w := w.(type) {
		case json.Number:
			switch g.(type) {
			case int64, uint64:
			default:
				t.Errorf("%s: %s is %T, want an integer", text, k, g)
			}
			if fmt.Sprint(g) != w.String() {
				t.Errorf("%s: %s = %v, idcar decode says %s", text, k, g, w)
			}
		case string:
			if g != w {
				t.Errorf("%s: %s = %#v, idcar decode says %q", text, k, g, w)
			}
		default:
			t.Errorf("%s: unexpected JSON value %s=%v", text, k, w)
		}
	}
}

func keys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

func TestPrefetchDropsOldIDs(t *testing.T) {
	s := startServer(t, "lable64")
	c := dial(t, idcar.Options{Socket: s.sock, Prefetch: 20, MaxAge: 100 * time.Millisecond})
	ctx := bounded(t, 30*time.Second)
	ms := func(id idcar.ID) int64 {
		f, err := id.Decode()
		if err != nil {
			t.Fatal(err)
		}
		return f["timestamp_ms"].(int64)
	}
	first, err := c.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	second, err := c.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := ms(second) - ms(first); d < 200 {
		t.Fatalf("ID issued %d ms after the first handed out 300 ms later: a buffered ID older than MaxAge", d)
	}
	ids, err := c.IDs(ctx, 50) // more than the buffer holds
	if err != nil || len(ids) != 50 {
		t.Fatalf("IDs(50) = %d IDs, %v", len(ids), err)
	}
	var u uniq
	u.add(append(ids, first, second)...)
	u.check(t, 52)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Next(ctx); !errors.Is(err, idcar.ErrClosed) {
		t.Fatalf("Next after Close: %v, want ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestCloseWhileBusy(t *testing.T) {
	s := startServer(t, "lable64")
	// busy runs workers calling Next until it fails, closes the client after pause, and
	// checks that Close and every caller return promptly, with ErrClosed, and that no ID
	// was handed out twice.
	busy := func(t *testing.T, opts idcar.Options, workers int, pause time.Duration) {
		t.Helper()
		c, err := idcar.Dial(opts)
		if err != nil {
			t.Fatalf("Dial: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var u uniq
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					id, err := c.Next(ctx)
					if err != nil {
						errs <- err
						return
					}
					u.add(id)
				}
			}()
		}
		time.Sleep(pause)
		start := time.Now()
		closed := make(chan struct{})
		go func() { c.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(5 * time.Second):
			t.Fatal("Close did not return within 5 s while calls were running")
		}
		wg.Wait()
		if el := time.Since(start); el > 5*time.Second {
			t.Fatalf("callers returned %v after Close", el)
		}
		close(errs)
		for err := range errs {
			if !errors.Is(err, idcar.ErrClosed) {
				t.Fatalf("after Close: %v, want ErrClosed", err)
			}
		}
		u.check(t, len(u.seen))
	}
	t.Run("prefetch=100", func(t *testing.T) {
		busy(t, idcar.Options{Socket: s.sock, Prefetch: 100}, 4, 100*time.Millisecond)
	})
	t.Run("prefetch=0", func(t *testing.T) {
		busy(t, idcar.Options{Socket: s.sock}, 8, 100*time.Millisecond)
	})
	// Close racing callers that take and give back connection tokens (one connection, so
	// the pool is mostly empty): Close once waited for a token while holding the lock
	// the caller needed to give it back.
	t.Run("repeated", func(t *testing.T) {
		for r := 0; r < 300; r++ {
			busy(t, idcar.Options{Socket: s.sock, Conns: 1}, 8, time.Duration(r%5)*50*time.Microsecond)
		}
	})
}

// ---- fake servers: bad answers are errors, never hangs ----

func frame(status, width byte, payload []byte) []byte {
	h := []byte{0xd1, status, width, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(h[4:], uint32(len(payload)))
	return append(h, payload...)
}

var describeLable64 = frame(0, 8, []byte(`{"form":"hex","layout":"lable64","params":{"cluster-id":"0"},"width":8}`))

// fakeServer answers each request (opcode, count) with respond's bytes; nil: no answer.
func fakeServer(t *testing.T, respond func(op byte, count uint32) []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fake.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				for {
					var h [4]byte
					if _, err := io.ReadFull(c, h[:]); err != nil {
						return
					}
					var count uint32
					if h[1] == 0x01 {
						var p [4]byte
						if _, err := io.ReadFull(c, p[:]); err != nil {
							return
						}
						count = binary.BigEndian.Uint32(p[:])
					}
					if out := respond(h[1], count); out != nil {
						if _, err := c.Write(out); err != nil {
							return
						}
					}
				}
			}()
		}
	}()
	return path
}

// afterDescribe answers describe as a lable64 server and get with get.
func afterDescribe(get func(count uint32) []byte) func(byte, uint32) []byte {
	return func(op byte, count uint32) []byte {
		if op == 0x02 {
			return describeLable64
		}
		return get(count)
	}
}

func TestBadResponses(t *testing.T) {
	ctx := bounded(t, 60*time.Second)
	opts := func(path string) idcar.Options {
		return idcar.Options{Socket: path, Timeout: 300 * time.Millisecond, RetryDeadline: time.Second}
	}
	protocolCase := func(name string, respond func(byte, uint32) []byte, atDial bool) {
		t.Run(name, func(t *testing.T) {
			path := fakeServer(t, respond)
			start := time.Now()
			var err error
			if atDial {
				_, err = idcar.Dial(opts(path))
			} else {
				c := dial(t, opts(path))
				_, err = c.Next(ctx)
			}
			if !errors.Is(err, idcar.ErrProtocol) {
				t.Fatalf("error %v, want ErrProtocol", err)
			}
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error %q does not name the socket", err)
			}
			if el := time.Since(start); el > 2*time.Second {
				t.Fatalf("protocol error after %v", el)
			}
		})
	}
	protocolCase("garbage", func(byte, uint32) []byte {
		return []byte("HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
	}, true)
	protocolCase("describe-not-json", func(byte, uint32) []byte {
		return frame(0, 8, []byte("hello"))
	}, true)
	protocolCase("wrong-width", afterDescribe(func(n uint32) []byte {
		return frame(0, 10, make([]byte, 10*n))
	}), false)
	protocolCase("length-not-multiple", afterDescribe(func(n uint32) []byte {
		return frame(0, 8, make([]byte, 8*n+4))
	}), false)
	protocolCase("unknown-status", afterDescribe(func(uint32) []byte {
		return frame(7, 0, []byte("what"))
	}), false)
	t.Run("silent", func(t *testing.T) {
		c := dial(t, opts(fakeServer(t, afterDescribe(func(uint32) []byte { return nil }))))
		start := time.Now()
		_, err := c.Next(ctx)
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("error %v, want a timeout", err)
		}
		if el := time.Since(start); el < 300*time.Millisecond || el > 3*time.Second {
			t.Fatalf("timeout after %v, want about 300 ms", el)
		}
	})
	t.Run("bad-request", func(t *testing.T) {
		c := dial(t, opts(fakeServer(t, afterDescribe(func(uint32) []byte {
			return frame(1, 0, []byte("count is above --max-batch\n"))
		}))))
		start := time.Now()
		_, err := c.IDs(ctx, 5)
		var se *idcar.ServerError
		if !errors.Is(err, idcar.ErrBadRequest) || !errors.As(err, &se) || se.Reason != "count is above --max-batch" {
			t.Fatalf("error %v, want ErrBadRequest with the reason", err)
		}
		if el := time.Since(start); el > 500*time.Millisecond {
			t.Fatalf("bad request retried: error after %v", el)
		}
	})
	t.Run("server-without-describe", func(t *testing.T) {
		c := dial(t, opts(fakeServer(t, func(op byte, n uint32) []byte {
			if op == 0x02 {
				return frame(1, 0, []byte("unknown opcode 2"))
			}
			out := make([]byte, 8*n)
			for i := range out {
				out[i] = byte(i)
			}
			return frame(0, 8, out)
		})))
		id, err := c.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if id.String() != "0001020304050607" || c.Layout().Width != 8 {
			t.Fatalf("ID %s, layout %+v", id, c.Layout())
		}
	})
}

// ---- known answers, no server ----

func TestKnownAnswers(t *testing.T) {
	si53, _ := idcar.LayoutDescription("si53")
	si53.Params["base-clock"] = "1700000000000"
	for _, tc := range []struct {
		layout string
		desc   *idcar.Description
		text   string
		want   map[string]any
	}{
		{"lable64", nil, "7e3c018045810093", map[string]any{
			"layout": "lable64", "id": "7e3c018045810093", "timestamp_ms": int64(1795321511038),
			"sequence": int64(1), "generator": int64(9), "cluster": int64(3),
			"time": "2026-11-22T04:25:11.038Z"}},
		{"lable64", nil, "ffffffffffff03ff", map[string]any{
			"layout": "lable64", "id": "ffffffffffff03ff", "timestamp_ms": int64(4398046511103),
			"sequence": int64(63), "generator": int64(63), "cluster": int64(15),
			"time": "2109-05-15T07:35:11.103Z"}},
		{"muid128", nil, "5D5EAC793E61F-1BFC71B112D-0000000B", map[string]any{
			"layout": "muid128", "id": "5D5EAC793E61F-1BFC71B112D-0000000B",
			"packed_hex": "5d5eac793e61f1bfc71b112d0000000b", "timestamp": int64(1642579230975519),
			"medallion": int64(1923190821165), "offset": int64(11),
			"time": "2022-01-19T08:00:30.975519Z"}},
		{"muid128", nil, "FFFFFFFFFFFFF-FFFFFFFFFFF-FFFFFFFF", map[string]any{
			"layout": "muid128", "id": "FFFFFFFFFFFFF-FFFFFFFFFFF-FFFFFFFF",
			"packed_hex": "ffffffffffffffffffffffffffffffff", "timestamp": int64(4503599627370495),
			"medallion": int64(17592186044415), "offset": int64(-1),
			"time": "2112-09-17T23:53:47.370495Z"}},
		{"ugd60", nil, "qqqqqqqqtV", map[string]any{
			"layout": "ugd60", "id": "qqqqqqqqtV", "storage_hex": "55555555aaaab55",
			"timestamp_s": int64(1431655765), "worker": int64(341), "seq": int64(341),
			"random": int64(341), "time": "2063-07-13T02:09:25.000Z"}},
		{"sno80", nil, "222222242a226224", map[string]any{
			"layout": "sno80", "id": "222222242a226224", "bytes_hex": "00000000020200020002",
			"units": int64(1), "tick": int64(0), "meta": int64(2), "partition": int64(2),
			"partition_bytes_hex": "0002", "sequence": int64(2), "unix_ms": int64(1262304000004),
			"time": "2010-01-01T00:00:00.004Z"}},
		{"si53", &si53, "1013162", map[string]any{
			"layout": "si53", "id": int64(1013162), "MAB": int64(123), "MID": int64(21),
			"UIN": int64(170), "base_clock": int64(1700000000000),
			"timestamp_ms": int64(1700000000123), "time": "2023-11-14T22:13:20.123Z"}},
	} {
		d, err := idcar.LayoutDescription(tc.layout)
		if err != nil {
			t.Fatal(err)
		}
		if tc.desc != nil {
			d = *tc.desc
		}
		id, err := idcar.Parse(d, tc.text)
		if err != nil {
			t.Fatalf("Parse(%s): %v", tc.text, err)
		}
		if id.String() != tc.text {
			t.Errorf("String() = %s, want %s", id, tc.text)
		}
		got, err := id.Decode()
		if err != nil {
			t.Fatalf("Decode(%s): %v", tc.text, err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Decode(%s) =\n%v\nwant\n%v", tc.text, got, tc.want)
		}
		again, err := idcar.FromBytes(d, id.Bytes())
		if err != nil || again.String() != tc.text {
			t.Errorf("FromBytes(%x) = %s, %v", id.Bytes(), again, err)
		}
	}
	lable64, _ := idcar.LayoutDescription("lable64")
	id, _ := idcar.Parse(lable64, "7e3c018045810093")
	if v, ok := id.Uint64(); !ok || v != 0x7e3c018045810093 {
		t.Errorf("Uint64() = %x, %v", v, ok)
	}
	bad, err := idcar.Parse(lable64, "7e3c018045810493") // reserved bit 10 set
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.Decode(); !errors.Is(err, idcar.ErrInvalidID) {
		t.Errorf("Decode with reserved bits: %v, want ErrInvalidID", err)
	}
	if _, err := idcar.Parse(lable64, "xyz"); !errors.Is(err, idcar.ErrInvalidID) {
		t.Errorf("Parse(xyz): %v, want ErrInvalidID", err)
	}
}
