package idcar_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
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
		// The newer of the repository's debug and release builds, as a checkout has them.
		var newest time.Time
		for _, b := range []string{"../../target/debug/idcar", "../../target/release/idcar"} {
			if st, err := os.Stat(b); err == nil && st.ModTime().After(newest) {
				newest, bin = st.ModTime(), b
			}
		}
		if bin == "" {
			fmt.Fprintln(os.Stderr, "FAIL: no idcar server to test against: build it (cargo build --bin idcar) or set IDCAR_BIN=/path/to/idcar")
			return 1
		}
		if abs, err := filepath.Abs(bin); err == nil {
			bin = abs
		}
		os.Setenv("IDCAR_BIN", bin)
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
