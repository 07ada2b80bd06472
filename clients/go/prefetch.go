package idcar

import (
	"context"
	"sync"
	"time"
)

// stamped is a buffered ID and when its request was sent (monotonic, since the
// prefetcher's epoch): the ID was issued no earlier than that.
type stamped struct {
	id ID
	at time.Duration
}

// prefetcher keeps a buffer of IDs, refilled by one background goroutine at a time when it
// falls to the low-water mark. Each ID leaves the buffer once, under mu; IDs older than
// maxAge are dropped.
type prefetcher struct {
	c      *Client
	size   int
	low    int
	maxAge time.Duration
	epoch  time.Time
	ctx    context.Context // cancelled by close: stops the refill
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	buf       []stamped // buf[head:] are the buffered IDs, oldest first
	head      int
	refilling bool
	gen       uint64        // number of refills started
	failedGen uint64        // the last refill that failed, and its error
	failErr   error         //
	avail     chan struct{} // closed (and replaced) when IDs arrive or a refill ends
	closed    bool
}

func newPrefetcher(c *Client, size, low int, maxAge time.Duration) *prefetcher {
	ctx, cancel := context.WithCancel(context.Background())
	return &prefetcher{
		c: c, size: size, low: low, maxAge: maxAge, epoch: time.Now(),
		ctx: ctx, cancel: cancel, avail: make(chan struct{}),
	}
}

// next hands out one buffered ID, waiting for a refill when the buffer is empty.
func (p *prefetcher) next(ctx context.Context) (ID, error) {
	var waited uint64 // the refill this caller waited for, if any
	p.mu.Lock()
	for {
		if p.closed {
			p.mu.Unlock()
			return ID{}, ErrClosed
		}
		p.expireLocked()
		if p.head < len(p.buf) {
			id := p.buf[p.head].id
			p.buf[p.head] = stamped{}
			p.head++
			p.refillIfLowLocked()
			p.mu.Unlock()
			return id, nil
		}
		if waited != 0 && p.failedGen == waited && !p.refilling {
			err := p.failErr
			p.mu.Unlock()
			return ID{}, err
		}
		if !p.refilling {
			p.startRefillLocked()
		}
		waited = p.gen
		ch := p.avail
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ID{}, ctx.Err()
		}
		p.mu.Lock()
	}
}

// ids appends n IDs to dst in the order the server issued them: buffered ones first; found
// empty, the buffer is waited for while a refill is in flight, else the rest is fetched by
// this caller while no refill may start (a fetch past a refill in flight would hand out
// newer IDs before older ones).
func (p *prefetcher) ids(ctx context.Context, n int, dst []ID) ([]ID, error) {
	p.mu.Lock()
	for {
		if p.closed {
			p.mu.Unlock()
			return dst, ErrClosed
		}
		p.expireLocked()
		for ; n > 0 && p.head < len(p.buf); n-- {
			dst = append(dst, p.buf[p.head].id)
			p.buf[p.head] = stamped{}
			p.head++
		}
		if n == 0 {
			p.refillIfLowLocked()
			p.mu.Unlock()
			return dst, nil
		}
		if !p.refilling {
			break
		}
		ch := p.avail
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return dst, ctx.Err()
		}
		p.mu.Lock()
	}
	// This caller is the refill now: a generation of its own, so that a waiter never takes
	// an earlier refill's failure for this one's.
	p.refilling = true
	p.gen++
	p.mu.Unlock()
	dst, err := p.c.fetch(ctx, n, dst)
	p.mu.Lock()
	p.refilling = false
	if !p.closed {
		p.refillIfLowLocked()
	}
	p.signalLocked()
	p.mu.Unlock()
	return dst, err
}

// expireLocked drops buffered IDs older than maxAge (the oldest are first).
func (p *prefetcher) expireLocked() {
	limit := time.Since(p.epoch) - p.maxAge
	for p.head < len(p.buf) && p.buf[p.head].at < limit {
		p.buf[p.head] = stamped{}
		p.head++
	}
	if p.head == len(p.buf) {
		p.buf, p.head = p.buf[:0], 0
	}
}

func (p *prefetcher) refillIfLowLocked() {
	if !p.refilling && len(p.buf)-p.head <= p.low {
		p.startRefillLocked()
	}
}

func (p *prefetcher) startRefillLocked() {
	p.refilling = true
	p.gen++
	p.wg.Add(1)
	go p.refill(p.gen, p.size-(len(p.buf)-p.head))
}

// signalLocked wakes the callers waiting for IDs.
func (p *prefetcher) signalLocked() {
	close(p.avail)
	p.avail = make(chan struct{})
}

// refill fetches n IDs in requests of at most maxChunk, making each batch available as it
// arrives.
func (p *prefetcher) refill(gen uint64, n int) {
	defer p.wg.Done()
	var err error
	var batch []ID
	for n > 0 {
		k := n
		if k > maxChunk {
			k = maxChunk
		}
		var at time.Duration
		err = p.c.withRetry(p.ctx, func(cn *conn) error {
			at = time.Since(p.epoch) // this request's IDs are issued after now
			var e error
			batch, e = cn.get(p.ctx, k, batch[:0])
			return e
		})
		if err != nil {
			break
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return
		}
		if p.head > 0 && p.head >= len(p.buf)/2 {
			p.buf = p.buf[:copy(p.buf, p.buf[p.head:])]
			p.head = 0
		}
		for _, id := range batch {
			p.buf = append(p.buf, stamped{id: id, at: at})
		}
		p.signalLocked()
		p.mu.Unlock()
		n -= k
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refilling = false
	if err != nil {
		p.failedGen, p.failErr = gen, err
	}
	p.signalLocked()
}

// close stops the refill (waiting for it to end) and drops the buffer.
func (p *prefetcher) close() {
	p.mu.Lock()
	p.closed = true
	p.buf, p.head = nil, 0
	p.signalLocked()
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
}
