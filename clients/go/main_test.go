package idcar_test

import (
	"fmt"
	"os"
	"testing"
)

// TestMain starts one lable64 server from $IDCAR_BIN for the examples (they connect through
// IDCAR_SOCKET, the client's default, as a program would) and stops it afterwards. Without
// IDCAR_BIN the run fails at once: the examples' checked output needs a real server, and a
// socket left over at /tmp/idcar.sock must not stand in for it.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	bin := os.Getenv("IDCAR_BIN")
	if bin == "" {
		fmt.Fprintln(os.Stderr, "FAIL: IDCAR_BIN is not set: set it to the idcar binary, e.g. IDCAR_BIN=/path/to/target/debug/idcar go test ./...")
		return 1
	}
	dir, err := os.MkdirTemp("", "idcar-go-examples-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	s := newServer(bin, dir, "lable64")
	defer s.stop()
	if err := s.launch(); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: the examples' server:", err)
		return 1
	}
	if err := os.Setenv("IDCAR_SOCKET", s.sock); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	return m.Run()
}
