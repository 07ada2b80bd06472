package idcar

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Sentinel errors, for errors.Is. Errors returned by a Client wrap one of these (or a
// *SocketError) and carry the details in their message.
var (
	// ErrUnavailable: the server answered status 2 (no lease yet, mark reached, request
	// timed out) until the retry deadline passed. The error is a *ServerError holding the
	// server's reason.
	ErrUnavailable = errors.New("idcar: unavailable")
	// ErrBadRequest: the server answered status 1 (never retried), or the caller asked for
	// something impossible (a negative count). Server answers are *ServerError values.
	ErrBadRequest = errors.New("idcar: bad request")
	// ErrProtocol: the answer was not valid idcar binary protocol (wrong magic byte,
	// unknown status, unexpected width or length, bad describe JSON). The connection is
	// dropped and the call is not retried.
	ErrProtocol = errors.New("idcar: protocol error")
	// ErrClosed: the Client was closed.
	ErrClosed = errors.New("idcar: client is closed")
	// ErrNotUint64: the layout's IDs are not 8 bytes wide (sno80, muid128, uuid7).
	ErrNotUint64 = errors.New("idcar: IDs of this layout are not 64-bit integers")
	// ErrInvalidID: bytes or text that are not a valid ID of the layout.
	ErrInvalidID = errors.New("idcar: invalid ID")
)

// Response statuses of the binary protocol.
const (
	statusOK          = 0
	statusBadRequest  = 1
	statusUnavailable = 2
)

// ServerError is an error status answered by the server, with its one-line reason.
// errors.Is(err, ErrUnavailable) holds for status 2 and errors.Is(err, ErrBadRequest) for
// status 1.
type ServerError struct {
	Status int    // 1 bad request, 2 unavailable
	Reason string // the server's reason, e.g. "no lease is held"
}

func (e *ServerError) Error() string {
	switch e.Status {
	case statusBadRequest:
		return "idcar: bad request: " + e.Reason
	case statusUnavailable:
		return "idcar: unavailable: " + e.Reason
	}
	return fmt.Sprintf("idcar: status %d: %s", e.Status, e.Reason)
}

// Is reports whether target is the sentinel matching the status.
func (e *ServerError) Is(target error) bool {
	return (target == ErrUnavailable && e.Status == statusUnavailable) ||
		(target == ErrBadRequest && e.Status == statusBadRequest)
}

// SocketError is a failure to connect to, write to or read from the server's socket. It
// names the socket path; Err is the cause (e.g. syscall.ENOENT, syscall.ECONNREFUSED,
// syscall.EACCES, io.EOF, os.ErrDeadlineExceeded), so errors.Is works on it.
type SocketError struct {
	Op     string // "connect", "write" or "read"
	Socket string // the socket path
	Err    error
}

func (e *SocketError) Error() string {
	switch e.Op {
	case "connect":
		return fmt.Sprintf("idcar: cannot connect to %s: %v", e.Socket, e.Err)
	case "write":
		return fmt.Sprintf("idcar: write to %s: %v", e.Socket, e.Err)
	}
	if errors.Is(e.Err, io.EOF) || errors.Is(e.Err, io.ErrUnexpectedEOF) {
		return fmt.Sprintf("idcar: read from %s: connection closed by the server", e.Socket)
	}
	return fmt.Sprintf("idcar: %s from %s: %v", e.Op, e.Socket, e.Err)
}

// Unwrap returns the cause.
func (e *SocketError) Unwrap() error { return e.Err }

// NoDirError is the cause of a SocketError when the socket's directory does not exist (or
// is not a directory). It is never retried: the server does not create directories.
type NoDirError struct {
	Dir  string // the socket's directory
	What string // "does not exist" or "is not a directory"
	Err  error  // the connect error (ENOENT or ENOTDIR)
}

func (e *NoDirError) Error() string { return fmt.Sprintf("directory %s %s", e.Dir, e.What) }

// Unwrap returns the connect error.
func (e *NoDirError) Unwrap() error { return e.Err }

// noDir wraps err in a NoDirError if connecting to socket failed for want of its directory.
func noDir(socket string, err error) error {
	if !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.ENOTDIR) {
		return err
	}
	dir := filepath.Dir(socket)
	st, statErr := os.Stat(dir)
	switch {
	case statErr == nil && st.IsDir():
		return err
	case statErr == nil:
		return &NoDirError{Dir: dir, What: "is not a directory", Err: err}
	case errors.Is(statErr, fs.ErrNotExist) || errors.Is(statErr, syscall.ENOTDIR):
		return &NoDirError{Dir: dir, What: "does not exist", Err: err}
	}
	return err
}

// Timeout reports whether the server did not answer within the timeout.
func (e *SocketError) Timeout() bool { return errors.Is(e.Err, os.ErrDeadlineExceeded) }

func protocolError(socket, format string, args ...any) error {
	return fmt.Errorf("%w from %s: %s", ErrProtocol, socket, fmt.Sprintf(format, args...))
}

// retryable reports whether err is worth another try: an unavailable answer, a socket that
// is missing or refuses connections (the server may be restarting), or a connection the
// server closed or reset (restart). Permission denied, timeouts, bad requests and protocol
// errors are not retried.
func retryable(err error) bool {
	var nd *NoDirError
	if errors.As(err, &nd) {
		return false
	}
	var se *ServerError
	if errors.As(err, &se) {
		return se.Status == statusUnavailable
	}
	var ke *SocketError
	if !errors.As(err, &ke) {
		return false
	}
	if ke.Op == "connect" {
		return errors.Is(ke.Err, syscall.ENOENT) || errors.Is(ke.Err, syscall.ECONNREFUSED)
	}
	return broken(ke.Err)
}

// broken reports whether err means the peer closed or reset the connection.
func broken(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
