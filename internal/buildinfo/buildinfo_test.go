package buildinfo

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stepfork/stepfork/trace"
)

func TestPackageOf(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, want string }{
		{"example.com/a/b.Run", "example.com/a/b"},
		{"example.com/a/b.Run.func1", "example.com/a/b"},
		{"example.com/a/b.(*Agent).Run", "example.com/a/b"},
		{"example.com/a/b_test.TestX.func2", "example.com/a/b"},
		{"github.com/stepfork/stepfork/replay.Typed[go.shape.struct { ID string \"json:\\\"id\\\"\" }/x.y,go.shape.string].func1", "github.com/stepfork/stepfork/replay"},
		{"main.agent", "main"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := packageOf(tt.name); got != tt.want {
			t.Errorf("packageOf(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestPseudo(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 14, 9, 30, 0, 0, time.UTC)
	tests := []struct {
		v, rev string
		at     time.Time
	}{
		{"v0.0.0-20260314093000-46b7ad0c4abd", "46b7ad0c4abd", at},
		{"v1.2.4-0.20260314093000-46b7ad0c4abd", "46b7ad0c4abd", at},
		{"v1.2.3-pre.0.20260314093000-46b7ad0c4abd", "46b7ad0c4abd", at},
		{"v2.0.0-20260314093000-46b7ad0c4abd+incompatible", "46b7ad0c4abd", at},
		{"v1.2.3", "", time.Time{}},
		{"(devel)", "", time.Time{}},
	}
	for _, tt := range tests {
		rev, got := pseudo(tt.v)
		if rev != tt.rev || !got.Equal(tt.at) {
			t.Errorf("pseudo(%q) = %q, %v; want %q, %v", tt.v, rev, got, tt.rev, tt.at)
		}
	}
}

func TestModuleRoot(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	write(t, filepath.Join(root, "go.mod"), "// a comment\nmodule \"example.com/support\"\n\ngo 1.26\n")
	write(t, filepath.Join(root, "tools", "go.mod"), "module example.com/support/tools\n")
	deep := filepath.Join(root, "agent", "refund")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := moduleRoot(deep, "example.com/support"); got != root {
		t.Errorf("moduleRoot(agent/refund) = %q, want %q", got, root)
	}
	if got := moduleRoot(filepath.Join(root, "tools"), "example.com/support"); got != "" {
		t.Errorf("moduleRoot(tools) = %q: a nested module is another module's tree", got)
	}
}

// TestGitHead reads HEAD from a repository, from a worktree of it, and
// after the refs are packed, against what git itself says.
func TestGitHead(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	t.Parallel()
	repo := t.TempDir()
	git := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.email=a@example.com", "-c", "user.name=a", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_COMMITTER_DATE=2026-03-14T09:30:00Z", "GIT_AUTHOR_DATE=2026-03-14T09:30:00Z")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git(repo, "init", "-q")
	write(t, filepath.Join(repo, "go.mod"), "module example.com/support\n")
	git(repo, "add", ".")
	git(repo, "commit", "-q", "-m", "first")
	want := git(repo, "rev-parse", "HEAD")
	at := time.Date(2026, 3, 14, 9, 30, 0, 0, time.UTC)

	rev, got := gitHead(filepath.Join(repo))
	if rev != want || !got.Equal(at) {
		t.Errorf("gitHead(repo) = %q, %v; want %q, %v", rev, got, want, at)
	}
	wt := filepath.Join(t.TempDir(), "wt")
	git(repo, "worktree", "add", "-q", "-b", "side", wt)
	if rev, _ := gitHead(wt); rev != want {
		t.Errorf("gitHead(worktree) = %q, want %q", rev, want)
	}
	git(repo, "pack-refs", "--all")
	git(repo, "gc", "-q")
	if rev, got := gitHead(repo); rev != want || !got.IsZero() {
		t.Errorf("gitHead(packed) = %q, %v; want %q and no time (the commit is packed)", rev, got, want)
	}
	if rev, _ := gitHead(t.TempDir()); rev != "" {
		t.Errorf("gitHead(no repository) = %q", rev)
	}
}

// TestOf: a function of this test binary's main module gets the main
// module's build; one of the standard library or of this module's
// adapters too.
func TestOf(t *testing.T) {
	t.Parallel()
	m, ok := Main()
	if !ok || m.Module != "github.com/stepfork/stepfork" || m.Go == "" {
		t.Fatalf("Main() = %+v, %v", m, ok)
	}
	for _, name := range []string{"github.com/stepfork/stepfork/internal/buildinfo.TestOf", "main.run", "github.com/stepfork/stepfork/replay.Typed[...].func1"} {
		if b, ok := Of(name); !ok || b != m {
			t.Errorf("Of(%q) = %+v, %v; want the main module's %+v\n%s", name, b, ok, m, cmp.Diff(m, b))
		}
	}
}

// TestResolve resolves functions against the build information of a
// binary with dependencies (a test binary has none).
func TestResolve(t *testing.T) {
	t.Parallel()
	bi := &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Path: "example.com/app", Version: "(devel)"}, Deps: []*debug.Module{
		{Path: "example.com/agents", Version: "v0.0.0-20260314093000-46b7ad0c4abd"},
		{Path: "example.com/agents/refund", Version: "v1.2.0"},
		{Path: "github.com/stepfork/stepfork", Version: "v0.3.0"},
		{Path: "github.com/stepfork/stepfork/contrib/eino", Version: "v0.3.0"},
		{Path: "example.com/forked", Version: "v1.0.0", Replace: &debug.Module{Path: "../forked", Version: ""}},
	}}
	m := trace.Build{Module: "example.com/app", Version: "(devel)", Revision: "0123456789abcdef0123456789abcdef01234567", Go: "go1.26.1"}
	tests := []struct {
		name string
		want trace.Build
	}{
		{"example.com/app/agent.Run", m},
		{"main.main", m},
		{"github.com/stepfork/stepfork/replay.Typed[...].func1", m},
		{"github.com/stepfork/stepfork/contrib/eino.Agent.func1", m},
		{"example.com/agents/triage.Run", trace.Build{Module: "example.com/agents", Version: "v0.0.0-20260314093000-46b7ad0c4abd",
			Revision: "46b7ad0c4abd", Time: time.Date(2026, 3, 14, 9, 30, 0, 0, time.UTC), Go: "go1.26.1"}},
		{"example.com/agents/refund.Run", trace.Build{Module: "example.com/agents/refund", Version: "v1.2.0", Go: "go1.26.1"}},
		{"example.com/forked/x.Run", trace.Build{Module: "example.com/forked", Go: "go1.26.1"}},
		{"example.com/other.Run", m},
	}
	for _, tt := range tests {
		if got := resolve(bi, m, tt.name); got != tt.want {
			t.Errorf("resolve(%q):\n%s", tt.name, cmp.Diff(tt.want, got))
		}
	}
}

func write(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// pseudoByPattern reads v with the regular expression pseudo used before it
// read the tail by hand: the reference pseudo must agree with.
func pseudoByPattern(v string) (string, time.Time) {
	m := regexp.MustCompile(`[-.](\d{14})-([0-9a-f]{12})(?:\+incompatible)?$`).FindStringSubmatch(v)
	if m == nil {
		return "", time.Time{}
	}
	t, err := time.Parse("20060102150405", m[1])
	if err != nil {
		return "", time.Time{}
	}
	return m[2], t.UTC()
}

// pseudoSeeds are versions near the edges of the pseudo-version tail.
var pseudoSeeds = []string{
	"v0.0.0-20260314093000-46b7ad0c4abd", "v1.2.4-0.20260314093000-46b7ad0c4abd", "v2.0.0-20260314093000-46b7ad0c4abd+incompatible",
	"20260314093000-46b7ad0c4abd", "-20260314093000-46b7ad0c4abd", "_20260314093000-46b7ad0c4abd", "v0.0.0-20261314093000-46b7ad0c4abd",
	"v0.0.0-2026031409300-46b7ad0c4abd", "v0.0.0-20260314093000-46B7AD0C4ABD", "v0.0.0-20260314093000-46b7ad0c4abd+incompatible+incompatible",
	"v0.0.0-20260314093000-46b7ad0c4abdx", "v0.0.0-20260314093000+46b7ad0c4abd", "v0.0.0-2026031409300a-46b7ad0c4abd", "+incompatible", "",
}

// TestPseudoAgreesWithPattern: pseudo reads every seed as the regular
// expression does.
func TestPseudoAgreesWithPattern(t *testing.T) {
	t.Parallel()
	for _, v := range pseudoSeeds {
		rev, at := pseudo(v)
		wantRev, wantAt := pseudoByPattern(v)
		if rev != wantRev || !at.Equal(wantAt) {
			t.Errorf("pseudo(%q) = %q, %v; the pattern reads %q, %v", v, rev, at, wantRev, wantAt)
		}
	}
}

// FuzzPseudo: pseudo reads every version as the regular expression does.
func FuzzPseudo(f *testing.F) {
	for _, v := range pseudoSeeds {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		rev, at := pseudo(v)
		wantRev, wantAt := pseudoByPattern(v)
		if rev != wantRev || !at.Equal(wantAt) {
			t.Fatalf("pseudo(%q) = %q, %v; the pattern reads %q, %v", v, rev, at, wantRev, wantAt)
		}
	})
}

// TestIsFullHash: a full commit hash is 40 (SHA-1) or 64 (SHA-256)
// lowercase hexadecimal digits, as ^[0-9a-f]{40}([0-9a-f]{24})?$ says.
func TestIsFullHash(t *testing.T) {
	t.Parallel()
	re := regexp.MustCompile(`^[0-9a-f]{40}([0-9a-f]{24})?$`)
	for _, s := range []string{"", strings.Repeat("a", 39), strings.Repeat("a", 40), strings.Repeat("a", 41), strings.Repeat("0", 64),
		strings.Repeat("0", 63), strings.Repeat("0", 65), strings.Repeat("A", 40), strings.Repeat("a", 39) + "\n", "ref: refs/heads/main"} {
		if got, want := isFullHash(s, 40) || isFullHash(s, 64), re.MatchString(s); got != want {
			t.Errorf("full hash %q: %v, want %v", s, got, want)
		}
	}
}
