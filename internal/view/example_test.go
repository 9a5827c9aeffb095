package view_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/stepfork/stepfork/internal/view"
	"github.com/stepfork/stepfork/trace"
)

// A run's page, written as one self-contained file.
func ExampleWriteFile() {
	tr, err := trace.Load("../../testdata/booking-agent.sftrace")
	if err != nil {
		panic(err)
	}
	dir, _ := os.MkdirTemp("", "view")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "run.html")
	if err := view.WriteFile(path, view.RunPage(tr)); err != nil {
		panic(err)
	}
	fi, _ := os.Stat(path)
	fmt.Println(fi.Size() > 0)
	// Output: true
}
