package idcar

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"time"
)

// Binary protocol constants (docs/protocol.md).
const (
	magic      = 0xD1
	opGet      = 0x01
	opDescribe = 0x02
	// maxChunk is the most IDs asked for in one request: below every layout's --max-batch.
	maxChunk = 1000
	// maxReason bounds an error reason or a describe answer.
	maxReason = 64 << 10
)

// A long-past time, to make blocked I/O return at once.
var aLongTimeAgo = time.Unix(1, 0)

// conn is one connection speaking the binary protocol, described on connect.
type conn struct {
	nc      net.Conn
	r       *bufio.Reader
	socket  string
	timeout time.Duration
	desc    *Description // nil until known (a server older than describe)
	width   int          // bytes per ID; 0 until known
	reused  bool         // handed out again after a call that went well
	req     [8]byte
	payload []byte
}

// dialConn connects to socket and sends a describe request.
func dialConn(ctx context.Context, socket string, timeout time.Duration) (*conn, error) {
	d := net.Dialer{Timeout: timeout}
	nc, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &SocketError{Op: "connect", Socket: socket, Err: noDir(socket, cause(err))}
	}
	c := &conn{nc: nc, r: bufio.NewReaderSize(nc, 16<<10), socket: socket, timeout: timeout}
	if err := c.describe(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

// cause strips the net and os wrappers off a socket error, keeping the errno (or EOF,
// or the deadline) for a readable message; errors.Is still sees it.
func cause(err error) error {
	var op *net.OpError
	if errors.As(err, &op) {
		err = op.Err
	}
	var sc *os.SyscallError
	if errors.As(err, &sc) {
		err = sc.Err
	}
	return err
}

func (c *conn) close() { c.nc.Close() }

// roundTrip sends req and reads one response: status, width and payload (valid until the
// next call). okMax bounds the payload of an ok answer.
func (c *conn) roundTrip(ctx context.Context, req []byte, okMax int) (status, width int, payload []byte, err error) {
	deadline := time.Now().Add(c.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := c.nc.SetDeadline(deadline); err != nil {
		return 0, 0, nil, &SocketError{Op: "write", Socket: c.socket, Err: cause(err)}
	}
	if done := ctx.Done(); done != nil {
		stop, exited := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(exited)
			select {
			case <-done:
				c.nc.SetDeadline(aLongTimeAgo)
			case <-stop:
			}
		}()
		defer func() {
			close(stop)
			<-exited
			if err != nil && ctx.Err() != nil {
				err = ctx.Err()
			}
		}()
	}
	if _, err := c.nc.Write(req); err != nil {
		return 0, 0, nil, &SocketError{Op: "write", Socket: c.socket, Err: cause(err)}
	}
	var h [8]byte
	if _, err := io.ReadFull(c.r, h[:]); err != nil {
		return 0, 0, nil, &SocketError{Op: "read", Socket: c.socket, Err: cause(err)}
	}
	if h[0] != magic {
		return 0, 0, nil, protocolError(c.socket, "bad magic byte 0x%02x (not an idcar binary-protocol answer)", h[0])
	}
	status, width = int(h[1]), int(h[2])
	n := binary.BigEndian.Uint32(h[4:])
	switch status {
	case statusOK:
		if n > uint32(okMax) {
			return 0, 0, nil, protocolError(c.socket, "answer of %d bytes, expected at most %d", n, okMax)
		}
	case statusBadRequest, statusUnavailable:
		if n > maxReason {
			return 0, 0, nil, protocolError(c.socket, "error reason of %d bytes", n)
		}
	default:
		return 0, 0, nil, protocolError(c.socket, "unknown status %d", status)
	}
	if cap(c.payload) < int(n) {
		c.payload = make([]byte, n)
	}
	payload = c.payload[:n]
	if _, err := io.ReadFull(c.r, payload); err != nil {
		return 0, 0, nil, &SocketError{Op: "read", Socket: c.socket, Err: cause(err)}
	}
	return status, width, payload, nil
}

func serverError(status int, payload []byte) error {
	return &ServerError{Status: status, Reason: strings.TrimSpace(string(payload))}
}

// describe asks the server what it serves and keeps the answer.
func (c *conn) describe(ctx context.Context) error {
	status, width, payload, err := c.roundTrip(ctx, []byte{magic, opDescribe, 0, 0}, maxReason)
	if err != nil {
		return err
	}
	switch status {
	case statusBadRequest:
		// A server older than describe: learn the width from the first answer.
		return nil
	case statusUnavailable:
		return serverError(status, payload)
	}
	var d Description
	if err := json.Unmarshal(payload, &d); err != nil {
		return protocolError(c.socket, "describe answer is not JSON: %v", err)
	}
	if d.Width != width || width < 1 || width > 16 || d.Layout == "" {
		return protocolError(c.socket, "describe answer %q with width %d in its header", payload, width)
	}
	if d.Params == nil {
		d.Params = map[string]string{}
	}
	c.desc, c.width = &d, width
	return nil
}

// get asks for count IDs (1..maxChunk) and appends them to dst.
func (c *conn) get(ctx context.Context, count int, dst []ID) ([]ID, error) {
	req := c.req[:]
	req[0], req[1], req[2], req[3] = magic, opGet, 0, 4
	binary.BigEndian.PutUint32(req[4:], uint32(count))
	okMax := count * 16
	if c.width > 0 {
		okMax = count * c.width
	}
	status, width, payload, err := c.roundTrip(ctx, req, okMax)
	if err != nil {
		return dst, err
	}
	if status != statusOK {
		return dst, serverError(status, payload)
	}
	if width < 1 || width > 16 {
		return dst, protocolError(c.socket, "IDs of %d bytes", width)
	}
	if c.width == 0 {
		c.width = width
		c.desc = &Description{Width: width, Form: "hex", Params: map[string]string{}}
	}
	if width != c.width {
		return dst, protocolError(c.socket, "IDs of %d bytes, described as %d", width, c.width)
	}
	if len(payload) != count*width {
		if len(payload)%width != 0 {
			return dst, protocolError(c.socket, "answer of %d bytes is not a multiple of the width %d", len(payload), width)
		}
		return dst, protocolError(c.socket, "%d IDs in answer to a request for %d", len(payload)/width, count)
	}
	for off := 0; off < len(payload); off += width {
		dst = append(dst, newID(c.desc, payload[off:off+width]))
	}
	return dst, nil
}
