package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stepfork/stepfork/internal/pybundle"
)

// TestViewServesManyClients serves the page of a 40,000-event run to 200
// clients at once, and to 20 more that send their request and never read
// the answer: every reader gets the whole page, and the server's peak
// memory stays under 300 MB (the page is rendered once and written to
// every client from memory; a client that does not read is cut off by
// the write timeout, not given a copy).
func TestViewServesManyClients(t *testing.T) {
	if testing.Short() {
		t.Skip("renders a 40,000-event page and writes it 200 times")
	}
	t.Parallel()
	dir := t.TempDir()
	bundle := filepath.Join(dir, "big.sftrace")
	if err := pybundle.Write(bundle, 20_000, false); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "view", bundle)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("no address: %v", err)
	}
	i := strings.Index(line, "http://")
	if i < 0 {
		t.Fatalf("no address in %q", line)
	}
	url := strings.Fields(line[i:])[0]
	host := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/")

	// The first request renders the page; the others come at once.
	size := get(t, url)
	var wg sync.WaitGroup
	for range 20 {
		c, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: "+host+"\r\n\r\n")
	}
	for range 200 {
		wg.Go(func() {
			if n := get(t, url); n != size {
				t.Errorf("a client read %d bytes, want %d", n, size)
			}
		})
	}
	wg.Wait()
	peak := peakRSS(t, cmd.Process.Pid)
	t.Logf("page of %d MB, server's peak memory %d MB", size>>20, peak>>20)
	if peak > 300<<20 {
		t.Errorf("the server's peak memory is %d MB, want under 300 MB", peak>>20)
	}
}

// get reads the page at url and returns its size.
func get(t *testing.T, url string) int64 {
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	res, err := (&http.Client{Transport: tr}).Get(url)
	if err != nil {
		t.Error(err)
		return 0
	}
	defer res.Body.Close()
	n, err := io.CopyBuffer(io.Discard, res.Body, make([]byte, 1<<20))
	if err != nil || res.StatusCode != 200 {
		t.Errorf("GET %s: %d, %v", url, res.StatusCode, err)
	}
	return n
}

// peakRSS returns the peak resident memory of the process pid.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for l := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}
