package clip_test

import (
	"fmt"

	"github.com/stepfork/stepfork/internal/clip"
)

func ExampleDiff() {
	before := "Refunds need a receipt and the order number."
	after := "Refunds need a receipt and the order number. Above the limit, ask for approval."
	a, b := clip.Diff(before, after, 24)
	fmt.Println(a)
	fmt.Println(b)
	// Output:
	// …umber.
	// …umber. Above the limit, …
}

func ExampleHead() {
	fmt.Println(clip.Head("Refunds need a receipt.", 7))
	// Output: Refunds…
}
