// Command bench measures IDs per second through sequential Next calls, without prefetch
// and with prefetch 1000:
//
//	go run ./examples/bench --socket /tmp/idcar.sock --seconds 3
//
// It prints "single <IDs/s>" and "prefetch <IDs/s>"; on failure one line
// "error: <reason>" to stderr and exit status 1.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	idcar "github.com/idcar/idcar/clients/go"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	socket := fs.String("socket", "", "the server's socket (default $IDCAR_SOCKET, else /tmp/idcar.sock)")
	seconds := fs.Float64("seconds", 3, "seconds per figure")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(os.Stderr)
			fs.Usage()
		}
		return err
	}
	if *seconds <= 0 {
		return errors.New("--seconds must be positive")
	}
	d := time.Duration(*seconds * float64(time.Second))
	for _, b := range []struct {
		name     string
		prefetch int
	}{{"single", 0}, {"prefetch", 1000}} {
		rate, err := measure(*socket, b.prefetch, d)
		if err != nil {
			return err
		}
		fmt.Printf("%s %.0f\n", b.name, rate)
	}
	return nil
}

// measure returns IDs per second of sequential Next calls for d.
func measure(socket string, prefetch int, d time.Duration) (float64, error) {
	c, err := idcar.Dial(idcar.Options{Socket: socket, Prefetch: prefetch})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	ctx := context.Background()
	start := time.Now()
	n := 0
	for {
		for i := 0; i < 64; i++ {
			if _, err := c.Next(ctx); err != nil {
				return 0, err
			}
		}
		n += 64
		if el := time.Since(start); el >= d {
			return float64(n) / el.Seconds(), nil
		}
	}
}
