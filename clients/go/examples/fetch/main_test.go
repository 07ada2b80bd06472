package main

import (
	"io"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	idcar "github.com/idcar/idcar/clients/go"
)

func TestRetryDeadlineFlag(t *testing.T) {
	for _, tc := range []struct {
		seconds float64
		want    time.Duration
	}{
		{0, idcar.NoRetry},
		{5, 5 * time.Second},
		{0.25, 250 * time.Millisecond},
		{1e-12, 1}, // positive: never the default
		{1e300, math.MaxInt64},
		{math.Inf(1), math.MaxInt64},
	} {
		if got, err := retryDeadline(tc.seconds); err != nil || got != tc.want {
			t.Errorf("retryDeadline(%v) = %v, %v; want %v", tc.seconds, got, err, tc.want)
		}
	}
	for _, bad := range []float64{-1, -1e-9, math.NaN(), math.Inf(-1)} {
		if got, err := retryDeadline(bad); err == nil {
			t.Errorf("retryDeadline(%v) = %v, want an error", bad, got)
		}
	}
}

// Bad values are one-line errors; the deadline bounds how long a missing socket is retried.
func TestRetryDeadlineRun(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.sock")
	for _, args := range [][]string{
		{"--retry-deadline", "abc"},
		{"--retry-deadline", "-1"},
		{"--retry-deadline", "NaN"},
		{"--retry-deadline"},
	} {
		err := run(append([]string{"--socket", missing}, args...), io.Discard)
		if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "retry-deadline") {
			t.Errorf("fetch %v: error %q, want one line naming --retry-deadline", args, err)
		}
	}
	for _, tc := range []struct {
		arg      string
		min, max time.Duration
	}{
		{"0", 0, time.Second},
		{"0.4", 400 * time.Millisecond, 3 * time.Second},
	} {
		start := time.Now()
		err := run([]string{"--socket", missing, "--retry-deadline", tc.arg}, io.Discard)
		el := time.Since(start)
		if err == nil || !strings.Contains(err.Error(), missing) {
			t.Fatalf("--retry-deadline %s: error %v, want one naming %s", tc.arg, err, missing)
		}
		if el < tc.min || el >= tc.max {
			t.Errorf("--retry-deadline %s: failed after %v, want [%v, %v)", tc.arg, el, tc.min, tc.max)
		}
	}
}
