package usd

import (
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestFormat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		x    float64
		want string
	}{
		{0, "$0.00"},
		{0.000015, "$0.000015"},    // a gpt-4o-mini call of 100 prompt tokens
		{0.0000149, "$0.000015"},   // rounded to the micro-dollar
		{0.0000145, "$0.000015"},   // half away from zero (0.0000145/1e-6 is 14.5 within an ulp)
		{0.0021, "$0.0021"},        // trailing zeros cut
		{0.5, "$0.50"},             // at least cents
		{1, "$1.00"},               //
		{12.345678, "$12.345678"},  //
		{12.3456789, "$12.345679"}, //
		{1234567.5, "$1234567.50"}, //
		{0.0000004, "<$0.000001"},  // positive but below half a micro-dollar
		{-0.0021, "-$0.0021"},      //
		{math.NaN(), "$?"},         //
		{math.Inf(1), "$?"},        //
	}
	for _, tt := range tests {
		if got := Format(tt.x); got != tt.want {
			t.Errorf("Format(%g) = %q, want %q", tt.x, got, tt.want)
		}
	}
}

func TestDelta(t *testing.T) {
	t.Parallel()
	tests := []struct {
		x    float64
		want string
	}{
		{0, "+$0.00"},
		{0.0021, "+$0.0021"},
		{-0.000015, "-$0.000015"},
		{-0.0000001, "-<$0.000001"},
	}
	for _, tt := range tests {
		if got := Delta(tt.x); got != tt.want {
			t.Errorf("Delta(%g) = %q, want %q", tt.x, got, tt.want)
		}
	}
}

// The complaint this package answers: three calls of $0.00004 each were
// shown as $0.0000 and added up to $0.0001. Shown with Format and totalled
// with Sum, the total is the sum of what is shown.
func TestSumIsTheSumOfWhatIsShown(t *testing.T) {
	t.Parallel()
	tests := [][]float64{
		{0.00004, 0.00004, 0.00004},
		{0.0000149, 0.0000149, 0.0000149},    // each shown as $0.000015: the total is $0.000045, not $0.000045 rounded from 0.0000447
		{0.1, 0.2, 0.3},                      // no floating-point 0.6000000000000001
		{12.3456784, 0.0000004, 0.0000004},   // the tiny ones show as <$0.000001 and add nothing
		{0.0000001, 0.0000001},               // all tiny: the total is tiny too, not $0.00
		{0.00321, 0.0001234567, 1.999999501}, //
	}
	for _, parts := range tests {
		shown := 0.0
		for _, p := range parts {
			shown += parseShown(t, Format(p))
		}
		got := Format(Sum(parts...))
		if all := Sum(parts...); all > 0 && Round(all) == 0 {
			if got != "<$0.000001" {
				t.Errorf("Sum(%v) shown as %q, want <$0.000001", parts, got)
			}
			continue
		}
		if want := Format(shown); got != want {
			t.Errorf("Sum(%v) shown as %q; the parts shown add up to %q", parts, got, want)
		}
	}
}

// parseShown reads an amount Format wrote.
func parseShown(t *testing.T, s string) float64 {
	t.Helper()
	if s == "<$0.000001" {
		return 0
	}
	var x float64
	if _, err := fmt.Sscan(strings.TrimPrefix(s, "$"), &x); err != nil {
		t.Fatalf("cannot read %q: %v", s, err)
	}
	return x
}

func TestTicks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		top  float64
		n    int
		want []string
	}{
		{0.00004, 4, []string{"$0.00", "$0.00001", "$0.00002", "$0.00003", "$0.00004"}},
		{0.000045, 4, []string{"$0.00", "$0.00002", "$0.00004", "$0.00006", "$0.00008"}},
		{0, 4, []string{"$0.00", "$0.000001", "$0.000002", "$0.000003", "$0.000004"}},
		{0.0000001, 2, []string{"$0.00", "$0.000001", "$0.000002"}},
		{3, 4, []string{"$0.00", "$1.00", "$2.00", "$3.00", "$4.00"}},
	}
	for _, tt := range tests {
		ticks := Ticks(tt.top, tt.n)
		var got []string
		for _, x := range ticks {
			got = append(got, Format(x))
		}
		if strings.Join(got, " ") != strings.Join(tt.want, " ") {
			t.Errorf("Ticks(%g, %d) = %v, want %v", tt.top, tt.n, got, tt.want)
		}
		if last := ticks[len(ticks)-1]; Round(last) < Round(tt.top) {
			t.Errorf("Ticks(%g, %d) ends at %g, below the top", tt.top, tt.n, last)
		}
	}
}

// The module's code prints amounts of dollars only through this package: no
// other file formats a float after a dollar sign.
func TestNoOtherFormatter(t *testing.T) {
	root := filepath.Join("..", "..")
	dollar := regexp.MustCompile(`\$%[-+ 0-9.]*[fgeFGEv]|\$\{\{printf|.\$. \+ .*toFixed\(`)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			if rel != "." {
				if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
					return filepath.SkipDir // another module
				}
			}
			if d.Name() == "testdata" || rel == filepath.Join("internal", "usd") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, "_test.go") || !(strings.HasSuffix(p, ".go") || strings.HasSuffix(p, ".js") || strings.HasSuffix(p, ".html")) {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(data), "\n") {
			if dollar.MatchString(line) && !strings.HasPrefix(strings.TrimSpace(line), "//") {
				t.Errorf("%s:%d formats an amount of dollars itself; use usd.Format: %s", rel, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
