// Command fetch prints IDs from an idcar server, one per line, in the server's default
// text form:
//
//	go run ./examples/fetch --socket /tmp/idcar.sock --count 5 [--prefetch 100] [--retry-deadline 5]
//
// --retry-deadline is how many seconds (a decimal number, default 5) unavailable answers
// and connection failures are retried; 0: no retry.
//
// On any failure it prints one line "error: <reason>" to stderr and exits 1.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	idcar "github.com/idcar/idcar/clients/go"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("fetch", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	socket := fs.String("socket", "", "the server's socket (default $IDCAR_SOCKET, else /tmp/idcar.sock)")
	count := fs.Int("count", 1, "how many IDs")
	prefetch := fs.Int("prefetch", 0, "prefetch buffer size (0: off)")
	retry := fs.Float64("retry-deadline", 5, "seconds to retry unavailable answers and connection failures (0: no retry)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(os.Stderr)
			fs.Usage()
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *count < 1 || *prefetch < 0 {
		return errors.New("--count must be at least 1 and --prefetch not negative")
	}
	deadline, err := retryDeadline(*retry)
	if err != nil {
		return err
	}
	c, err := idcar.Dial(idcar.Options{Socket: *socket, Prefetch: *prefetch, RetryDeadline: deadline})
	if err != nil {
		return err
	}
	defer c.Close()
	ctx := context.Background()
	var ids []idcar.ID
	if *prefetch > 0 {
		for i := 0; i < *count; i++ {
			id, err := c.Next(ctx)
			if err != nil {
				return err
			}
			ids = append(ids, id)
		}
	} else if ids, err = c.IDs(ctx, *count); err != nil {
		return err
	}
	w := bufio.NewWriter(stdout)
	for _, id := range ids {
		fmt.Fprintln(w, id)
	}
	return w.Flush()
}

// retryDeadline turns --retry-deadline seconds into Options.RetryDeadline: 0 is NoRetry;
// a deadline beyond what a time.Duration holds (about 292 years) is that longest one.
func retryDeadline(seconds float64) (time.Duration, error) {
	switch {
	case math.IsNaN(seconds) || seconds < 0:
		return 0, fmt.Errorf("--retry-deadline must be a number of seconds, 0 (no retry) or more, not %v", seconds)
	case seconds == 0:
		return idcar.NoRetry, nil
	case seconds >= float64(math.MaxInt64)/float64(time.Second):
		return math.MaxInt64, nil
	}
	d := time.Duration(seconds * float64(time.Second))
	if d < 1 {
		d = 1 // positive but below a nanosecond: still not the default
	}
	return d, nil
}
