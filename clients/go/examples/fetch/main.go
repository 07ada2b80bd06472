// Command fetch prints IDs from an idcar server, one per line, in the server's default
// text form:
//
//	go run ./examples/fetch --socket /tmp/idcar.sock --count 5 [--prefetch 100]
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
	"os"

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
	c, err := idcar.Dial(idcar.Options{Socket: *socket, Prefetch: *prefetch})
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
