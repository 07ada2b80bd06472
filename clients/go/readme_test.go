package idcar_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	idcar "github.com/idcar/idcar/clients/go"
)

// firstBlock returns the first fenced code block tagged lang in the Markdown file.
func firstBlock(t *testing.T, path, lang string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var block []string
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case !in && strings.TrimSpace(line) == "```"+lang:
			in = true
		case in && strings.TrimSpace(line) == "```":
			return strings.Join(block, "\n") + "\n"
		case in:
			block = append(block, line)
		}
	}
	t.Fatalf("%s has no complete ```%s block", path, lang)
	return ""
}

// goTool is the go command of the toolchain running the tests.
func goTool(t *testing.T) string {
	t.Helper()
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	p, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command: %v", err)
	}
	return p
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// TestReadmeExample builds the README's first ```go block as a program of its own module
// (using this checkout through a replace directive, offline) and runs it against a real
// server: its first line must be an ID that server just issued.
func TestReadmeExample(t *testing.T) {
	s := startServer(t, "lable64")
	ctx := bounded(t, 120*time.Second)
	src := firstBlock(t, "README.md", "go")
	if !strings.Contains(src, "package main") || !strings.Contains(src, "func main()") {
		t.Fatalf("the README's first go block is not a complete program:\n%s", src)
	}
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gomod := "module readme.example/app\n\ngo 1.19\n\nreplace github.com/idcar/idcar/clients/go => " + here + "\n"
	for name, text := range map[string]string{"go.mod": gomod, "main.go": src} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	exe := filepath.Join(dir, "app")
	build := exec.CommandContext(ctx, goTool(t), "build", "-o", exe, ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build of the README example: %v\n%s\n%s", err, out, src)
	}

	start := time.Now()
	cmd := exec.CommandContext(ctx, exe)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "IDCAR_SOCKET="+s.sock)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the README example failed: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	line, _, _ := strings.Cut(stdout.String(), "\n")
	line = strings.TrimSpace(line)

	// An ID of the server's layout, in its text form ...
	d, err := idcar.LayoutDescription("lable64")
	if err != nil {
		t.Fatal(err)
	}
	id, err := idcar.Parse(d, line)
	if err != nil || id.String() != line {
		t.Fatalf("first line %q is not a lable64 ID in its text form: %v", line, err)
	}
	if out, err := exec.CommandContext(ctx, idcarBin(t), "decode", "--layout", "lable64", line).CombinedOutput(); err != nil {
		t.Fatalf("idcar decode --layout lable64 %s: %v\n%s", line, err, out)
	}
	// ... issued while the example ran (not a constant), and not issued again since.
	f, err := id.Decode()
	if err != nil {
		t.Fatal(err)
	}
	issued := time.UnixMilli(f["timestamp_ms"].(int64))
	if issued.Before(start.Add(-time.Second)) || issued.After(time.Now().Add(time.Second)) {
		t.Fatalf("ID %s was issued at %v, not while the example ran (from %v)", line, issued, start)
	}
	c := dial(t, idcar.Options{Socket: s.sock})
	more, err := c.IDs(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range more {
		if m.String() == line {
			t.Fatalf("the server issued %s again", line)
		}
	}
}

// TestReadmeStartsWithInstallLine: the README's first two fenced blocks are the install
// commands (`go get` first) and then the example, with only the title and one paragraph before.
func TestReadmeStartsWithInstallLine(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	var fences []string
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") && len(strings.TrimSpace(line)) > 3 {
			fences = append(fences, strings.TrimSpace(line))
		}
		if len(fences) == 2 {
			break
		}
	}
	if len(fences) != 2 || fences[0] != "```sh" || fences[1] != "```go" {
		t.Fatalf("the first two fenced blocks are %v, want ```sh then ```go", fences)
	}
	before, after, _ := strings.Cut(text, "```sh\n")
	if !strings.HasPrefix(after, "go get github.com/idcar/idcar/clients/go") {
		t.Fatalf("the install block does not start with go get:\n%s", after)
	}
	headings := 0
	for _, line := range strings.Split(before, "\n") {
		if strings.HasPrefix(line, "#") {
			headings++
		}
	}
	if headings != 1 {
		t.Fatalf("%d headings before the install line, want only the title", headings)
	}
}
