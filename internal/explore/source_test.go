package explore

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The test file of the fixtures: the calls the session can start at, as
// tests write them.
const fixtureSource = `package shop_test

import (
	"context"
	"testing"

	sf "github.com/stepfork/stepfork/sftest"
	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/replay"
	openai "github.com/openai/openai-go/v3"
)

func TestShop(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	unused := openai.Float(0)
	base := sf.Load(t, "testdata/shop.sftrace")
	v := sf.Fork(t, base, fork.Failure(), w.agent.Run,
		fork.Prompt("decide", "x"))
	_, _ = v, unused
}

func TestSweep(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg, err := loadConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	agent := newAgent(cfg)
	tests := []string{"a", "b"}
	var variants []fork.Named
	for _, tt := range tests {
		variants = append(variants, fork.Named{Name: tt})
	}
	sf.Sweep(t, sf.Load(t, "testdata/shop.sftrace"), fork.Failure(), agent, variants, nil)
}

func TestRecord(t *testing.T) {
	ai := newFake(t)
	tr := sf.Record(t, "shop", replay.Typed(ai.handle), 1)
	_ = tr
}

func TestTable(t *testing.T) {
	base := sf.Load(t, "testdata/shop.sftrace")
	for _, tt := range []struct{ agent replay.Agent }{{nil}} {
		t.Run("x", func(t *testing.T) {
			sf.Fork(t, base, fork.Failure(), tt.agent)
		})
	}
}

func TestShopExplore1(t *testing.T) {}
`

// lineOf is the line of the first line of src holding s.
func lineOf(t testing.TB, src, s string) int {
	t.Helper()
	i := strings.Index(src, s)
	if i < 0 {
		t.Fatalf("no %q in the fixture", s)
	}
	return strings.Count(src[:i], "\n") + 1
}

// siteFor writes the fixture test file into dir and returns the site of
// TestShop's Fork call.
func siteFor(t testing.TB, dir string) *Site {
	t.Helper()
	file := filepath.Join(dir, "shop_test.go")
	if err := os.WriteFile(file, []byte(fixtureSource), 0o644); err != nil {
		t.Fatal(err)
	}
	return Locate(file, lineOf(t, fixtureSource, "v := sf.Fork("), "Fork")
}

// assertNoCanaryUnder fails the test when a file under dir holds a
// canary.
func assertNoCanaryUnder(t *testing.T, dir string) {
	t.Helper()
	n := 0
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Error(err)
			return nil
		}
		n++
		for _, c := range []string{canaryToken, canaryPassword, "EXPLORECANARY"} {
			if strings.Contains(string(b), c) {
				t.Errorf("%s holds the canary %q", p, c)
			}
		}
		return nil
	})
	if n < 3 {
		t.Errorf("%d file(s) under %s: the test file and the bundle were not written", n, dir)
	}
}

func TestLocate(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "shop_test.go")
	if err := os.WriteFile(file, []byte(fixtureSource), 0o644); err != nil {
		t.Fatal(err)
	}
	body := "\tv := sftest.Fork(t, base, fork.Failure(), agent)\n\tassert.Completed(t, v)\n"
	tests := []struct {
		name, helper, at    string
		tparam, base, agent string
		test                string
		setup               string // the function as the test file writes it, "" when none is written
		noFile              string
	}{
		{name: "fork", helper: "Fork", at: "v := sf.Fork(", tparam: "t", base: "base", agent: "w.agent.Run", test: "TestShop",
			setup: "func TestShopExplore2(t *testing.T) {\n\tt.Parallel()\n\tw := newWorld(t)\n\tbase := sf.Load(t, \"testdata/shop.sftrace\")\n\n\tv := sftest.Fork(t, base, fork.Failure(), w.agent.Run)"},
		{name: "sweep", helper: "Sweep", at: "sf.Sweep(", tparam: "t", base: `sf.Load(t, "testdata/shop.sftrace")`, agent: "agent", test: "TestSweep",
			setup: "func TestSweepExplore1(t *testing.T) {\n\tctx, cancel := context.WithCancel(context.Background())\n\tdefer cancel()\n\tcfg, err := loadConfig(ctx)\n\tif err != nil {\n\t\tt.Fatal(err)\n\t}\n\tagent := newAgent(cfg)\n\n\tv := sftest.Fork(t, sf.Load(t, \"testdata/shop.sftrace\"), fork.Failure(), agent)"},
		{name: "record", helper: "Record", at: "tr := sf.Record(", tparam: "t", base: "tr", agent: "replay.Typed(ai.handle)", test: "TestRecord",
			setup: "func TestRecordExplore1(t *testing.T) {\n\tai := newFake(t)\n\ttr := sf.Record(t, \"shop\", replay.Typed(ai.handle), 1)\n\n\tv := sftest.Fork(t, tr, fork.Failure(), replay.Typed(ai.handle))"},
		{name: "in a loop", helper: "Fork", at: "\t\t\tsf.Fork(t, base, fork.Failure(), tt.agent)", tparam: "t", base: "base", agent: "tt.agent", test: "TestTable",
			noFile: "the code uses tt, declared by the range loop around the call"},
		{name: "wrong line", helper: "Fork", at: "func TestRecord", tparam: "t", base: "base", agent: "agent", noFile: "no call of sftest.Fork at shop_test.go:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Locate(file, lineOf(t, fixtureSource, tt.at), tt.helper)
			if s.tparam != tt.tparam || s.base != tt.base || s.agent != tt.agent || s.Test != tt.test {
				t.Errorf("located t=%q base=%q agent=%q in %q, want %q %q %q in %q", s.tparam, s.base, s.agent, s.Test, tt.tparam, tt.base, tt.agent, tt.test)
			}
			code := strings.NewReplacer("t, base,", s.tparam+", "+s.base+",", "agent)", s.agent+")").Replace(body)
			fn, _, err := s.freeName(1)
			if err != nil && tt.noFile == "" {
				t.Fatal(err)
			}
			got, err := s.testFile(fn, "doc", code)
			if tt.noFile != "" {
				if err == nil || !strings.Contains(err.Error(), tt.noFile) {
					t.Errorf("error %v, want one with %q", err, tt.noFile)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(got, tt.setup) {
				t.Errorf("the test file:\n%s\nwant it to hold:\n%s", got, tt.setup)
			}
		})
	}
}

// The test file imports what it uses of the test's imports, under the
// test's names, and the packages of the code; nothing else.
func TestTestFileImports(t *testing.T) {
	dir := t.TempDir()
	s := siteFor(t, dir)
	fn, file, err := s.freeName(1)
	if err != nil {
		t.Fatal(err)
	}
	if fn != "TestShopExplore2" || filepath.Base(file) != "shop_explore2_test.go" {
		t.Errorf("free name %s in %s: TestShopExplore1 is taken", fn, file)
	}
	got, err := s.testFile(fn, "TestShopExplore2 reproduces run 1.", "\tv := sftest.Fork(t, base, fork.Failure(), w.agent.Run)\n\tassert.OutputEqual(t, v, trace.MustParse(`{}`))\n")
	if err != nil {
		t.Fatal(err)
	}
	want := `package shop_test

import (
	"testing"

	"github.com/stepfork/stepfork/assert"
	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/sftest"
	sf "github.com/stepfork/stepfork/sftest"
	"github.com/stepfork/stepfork/trace"
)

// TestShopExplore2 reproduces run 1.
func TestShopExplore2(t *testing.T) {
`
	if !strings.HasPrefix(got, want) {
		t.Errorf("the test file starts:\n%s\nwant:\n%s", got, want)
	}
}

func TestWriteNewNeverOverwrites(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x_test.go")
	if err := writeNew(p, []byte("one")); err != nil {
		t.Fatal(err)
	}
	err := writeNew(p, []byte("two"))
	if err == nil || !strings.Contains(err.Error(), "never overwritten") {
		t.Errorf("a second write: %v", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "one" {
		t.Errorf("the file holds %q", b)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("%d files in the directory: a temporary file was left", len(ents))
	}
}

func TestPackageName(t *testing.T) {
	for p, want := range map[string]string{
		"testing": "testing", "github.com/openai/openai-go/v3": "openai", "gopkg.in/yaml.v3": "yaml",
		"github.com/stepfork/stepfork/sftest": "sftest", "github.com/go-chi/chi/v5": "chi", "example.com/my-lib": "mylib",
	} {
		if got := packageName(p); got != want {
			t.Errorf("packageName(%q) = %q, want %q", p, got, want)
		}
	}
}

func TestSnake(t *testing.T) {
	for in, want := range map[string]string{"RefundNeedsApproval": "refund_needs_approval", "HTTPServer": "http_server", "": "test", "X": "x"} {
		if got := snake(in); got != want {
			t.Errorf("snake(%q) = %q, want %q", in, got, want)
		}
	}
}
