// Package idcar is the Go client of idcar, the unique-ID sidecar: it fetches IDs over the
// sidecar's Unix socket with the binary protocol, retries while the server restarts or has
// no lease yet, optionally prefetches IDs into a local buffer, and formats and decodes the
// IDs of every layout (lable64, ugd60, si53, sno80, muid128, uuid7) exactly as `idcar` does.
// A uuid7 server's IDs are RFC 9562 version-7 UUIDs: ID.UUID gives them as a UUID.
//
//	c, err := idcar.Dial(idcar.Options{Socket: "/tmp/idcar.sock"})
//	if err != nil { ... }
//	defer c.Close()
//	id, err := c.Next(ctx)
//	fmt.Println(id) // 7e3c018045810093
//
// The standard library is its only dependency. The contract all idcar clients share is
// clients/SPEC.md in the idcar repository; the wire protocol is docs/protocol.md.
package idcar

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of Options.
const (
	DefaultSocket        = "/tmp/idcar.sock"
	DefaultTimeout       = 5 * time.Second
	DefaultRetryDeadline = 5 * time.Second
	DefaultMaxAge        = time.Second
	DefaultConns         = 4
	// NoRetry as Options.RetryDeadline: fail at the first unavailable answer or
	// connection failure (a connection found broken after sitting idle is still replaced
	// once, at once).
	NoRetry time.Duration = -1
)

// Backoff between retries: 10 ms, doubling, at most 200 ms.
const (
	firstBackoff = 10 * time.Millisecond
	maxBackoff   = 200 * time.Millisecond
)

// Options configures a Client. The zero value is usable: every field has a default.
type Options struct {
	// Socket is the server's Unix socket path. Default: $IDCAR_SOCKET, else
	// /tmp/idcar.sock.
	Socket string
	// Timeout bounds every request's socket writes and reads (and connecting): a server
	// that stops answering is an error, never a hang. Default 5 s.
	Timeout time.Duration
	// RetryDeadline is how long unavailable answers (status 2) and connection failures
	// (missing socket, refused, reset) are retried, with backoff from 10 ms doubling to
	// 200 ms. Default (0) 5 s; negative (NoRetry): no retry.
	RetryDeadline time.Duration
	// Prefetch is the size of a local buffer of IDs refilled in the background; 0 (the
	// default) turns prefetch off. See the package README for the trade-off.
	Prefetch int
	// LowWater: a refill starts when the buffer holds this many IDs or fewer. Default (0)
	// Prefetch/4; negative: 0 (refill only when empty). At most Prefetch-1.
	LowWater int
	// MaxAge: buffered IDs older than this are dropped, never handed out. Default 1 s.
	MaxAge time.Duration
	// Conns is the most connections open to the server at once (concurrent calls beyond
	// it wait for one). Default 4.
	Conns int
}

// Client fetches IDs from one idcar server. It is safe for concurrent use by many
// goroutines; each call uses one of a few pooled connections. Close it when done.
type Client struct {
	socket        string
	timeout       time.Duration
	retryDeadline time.Duration

	// pool holds one token per allowed connection: an idle connection, or nil (dial on
	// use). Taking a token is the right to use a connection; it is always given back.
	pool   chan *conn
	closed atomic.Bool

	mu   sync.Mutex // guards desc; with closed, orders release against Close
	desc *Description

	pf *prefetcher // nil when prefetch is off
}

// Dial connects to the server (retrying up to the retry deadline), asks it to describe
// its IDs and returns a Client. The error names the socket path when it cannot connect.
func Dial(opts Options) (*Client, error) {
	return DialContext(context.Background(), opts)
}

// DialContext is Dial bounded by ctx as well.
func DialContext(ctx context.Context, opts Options) (*Client, error) {
	if opts.Socket == "" {
		opts.Socket = os.Getenv("IDCAR_SOCKET")
	}
	if opts.Socket == "" {
		opts.Socket = DefaultSocket
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.RetryDeadline == 0 {
		opts.RetryDeadline = DefaultRetryDeadline
	}
	if opts.Conns <= 0 {
		opts.Conns = DefaultConns
	}
	c := &Client{
		socket:        opts.Socket,
		timeout:       opts.Timeout,
		retryDeadline: opts.RetryDeadline,
		pool:          make(chan *conn, opts.Conns),
	}
	for i := 0; i < opts.Conns; i++ {
		c.pool <- nil
	}
	// Connect now: the layout is known from the start and a wrong path fails here.
	if err := c.withRetry(ctx, func(*conn) error { return nil }); err != nil {
		c.Close()
		return nil, err
	}
	if opts.Prefetch > 0 {
		low := opts.LowWater
		if low == 0 {
			low = opts.Prefetch / 4
		}
		if low < 0 {
			low = 0
		}
		if low >= opts.Prefetch {
			low = opts.Prefetch - 1
		}
		maxAge := opts.MaxAge
		if maxAge <= 0 {
			maxAge = DefaultMaxAge
		}
		c.pf = newPrefetcher(c, opts.Prefetch, low, maxAge)
	}
	return c, nil
}

// Socket returns the socket path the client talks to.
func (c *Client) Socket() string { return c.socket }

// Layout returns the server's description of its IDs (from the describe request sent on
// each new connection): layout, width, default text form and parameters.
func (c *Client) Layout() Description {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.desc == nil {
		return Description{}
	}
	return c.desc.clone()
}

// Next returns one new ID: from the prefetch buffer when prefetch is on, else in one
// request to the server.
func (c *Client) Next(ctx context.Context) (ID, error) {
	if c.pf != nil {
		return c.pf.next(ctx)
	}
	ids, err := c.fetch(ctx, 1, make([]ID, 0, 1))
	if err != nil {
		return ID{}, err
	}
	return ids[0], nil
}

// IDs returns n new IDs, in the order the server issued them. Large counts are asked for
// in requests of at most 1,000 IDs. With prefetch on, buffered IDs are used first.
func (c *Client) IDs(ctx context.Context, n int) ([]ID, error) {
	if n < 0 {
		return nil, fmt.Errorf("%w: count %d is negative", ErrBadRequest, n)
	}
	ids := make([]ID, 0, n)
	if c.pf != nil {
		return c.pf.ids(ctx, n, ids)
	}
	return c.fetch(ctx, n, ids)
}

// Uint64 returns one new ID as an integer, for the 8-byte layouts (lable64, ugd60,
// si53); for others (sno80, muid128, uuid7) it fails with ErrNotUint64.
func (c *Client) Uint64(ctx context.Context) (uint64, error) {
	if d := c.Layout(); d.Width != 8 && d.Width != 0 {
		return 0, fmt.Errorf("%w: %s IDs are %d bytes", ErrNotUint64, d.Layout, d.Width)
	}
	id, err := c.Next(ctx)
	if err != nil {
		return 0, err
	}
	v, ok := id.Uint64()
	if !ok {
		return 0, fmt.Errorf("%w: %s IDs are %d bytes", ErrNotUint64, id.Layout(), len(id.Bytes()))
	}
	return v, nil
}

// Close stops the background refill, drops buffered IDs and closes the connections.
// Calls made after Close fail with ErrClosed. Close is idempotent.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed.Load() {
		c.mu.Unlock()
		return nil
	}
	c.closed.Store(true)
	c.mu.Unlock()
	if c.pf != nil {
		c.pf.close()
	}
	// Close the idle connections, without blocking: a connection in use is closed by its
	// release, which sees closed (set above under mu, and release pushes under mu, so no
	// open connection can enter the pool from now on). Holding mu or waiting for a token
	// here would deadlock with a caller that holds a token and needs mu to release it.
	taken := 0
drain:
	for i := cap(c.pool); i > 0; i-- {
		select {
		case cn := <-c.pool:
			if cn != nil {
				cn.close()
			}
			taken++
		default:
			break drain
		}
	}
	for ; taken > 0; taken-- {
		c.pool <- nil // wakes callers waiting in acquire, which then see ErrClosed
	}
	return nil
}

// fetch appends n new IDs to dst, in requests of at most maxChunk.
func (c *Client) fetch(ctx context.Context, n int, dst []ID) ([]ID, error) {
	for n > 0 {
		k := n
		if k > maxChunk {
			k = maxChunk
		}
		err := c.withRetry(ctx, func(cn *conn) error {
			out, err := cn.get(ctx, k, dst)
			if err == nil {
				dst = out
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		n -= k
	}
	return dst, nil
}

// withRetry runs op on a connection, retrying retryable failures with backoff until the
// retry deadline; a connection that broke while idle (server restart) is replaced at once.
func (c *Client) withRetry(ctx context.Context, op func(*conn) error) error {
	start := time.Now()
	backoff := firstBackoff
	for {
		cn, err := c.acquire(ctx)
		stale := false
		if err == nil {
			err = op(cn)
			stale = err != nil && cn.reused && retryable(err) && !errors.Is(err, ErrUnavailable)
			c.release(cn, err)
			if err == nil {
				return nil
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !retryable(err) {
			return err
		}
		if stale {
			continue
		}
		if c.retryDeadline < 0 {
			return err
		}
		left := c.retryDeadline - time.Since(start)
		if left <= 0 {
			return fmt.Errorf("%w (still failing after retrying for %v)", err, time.Since(start).Round(time.Millisecond))
		}
		if backoff < left {
			left = backoff
		}
		t := time.NewTimer(left)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		if backoff *= 2; backoff > maxBackoff {
			backoff = maxBackoff
		}
	}
}

// acquire takes a connection token and returns an open, described connection.
func (c *Client) acquire(ctx context.Context) (*conn, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	var cn *conn
	select {
	case cn = <-c.pool:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if c.closed.Load() {
		c.release(cn, ErrClosed)
		return nil, ErrClosed
	}
	if cn != nil {
		cn.reused = true
		return cn, nil
	}
	cn, err := dialConn(ctx, c.socket, c.timeout)
	if err != nil {
		c.pool <- nil
		return nil, err
	}
	if cn.desc != nil {
		c.mu.Lock()
		c.desc = cn.desc
		c.mu.Unlock()
	}
	return cn, nil
}

// release gives the token back: the connection itself if it is still good (it answered,
// possibly with an error status), else nil and the connection is closed.
func (c *Client) release(cn *conn, err error) {
	var se *ServerError
	c.mu.Lock()
	defer c.mu.Unlock()
	if cn != nil && ((err != nil && !errors.As(err, &se)) || c.closed.Load()) {
		cn.close()
		cn = nil
	}
	if cn != nil && c.desc == nil && cn.desc != nil {
		c.desc = cn.desc // a server older than describe: known from its first answer
	}
	c.pool <- cn
}
