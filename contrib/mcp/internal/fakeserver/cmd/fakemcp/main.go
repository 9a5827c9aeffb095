// Command fakemcp serves the fake tracker (package fakeserver) over stdio.
// When FAKEMCP_LOG names a file, it appends "start" to it when the process
// starts and the name of every method or tool it answers, so a test can count
// the processes started and the calls they served.
package main

import (
	"context"
	"log"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stepfork/stepfork/contrib/mcp/internal/fakeserver"
)

func main() {
	logf := func(string) {}
	if path := os.Getenv("FAKEMCP_LOG"); path != "" {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			log.Fatal(err)
		}
		defer f.Close()
		logf = func(s string) { f.WriteString(s + "\n") }
	}
	logf("start")
	calls := &fakeserver.Calls{OnCall: logf}
	if err := fakeserver.New("tracker", calls).Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}
