package explore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/stepfork/stepfork/internal/explore"
	"github.com/stepfork/stepfork/replay"
)

// A session of a recorded run: the page's address holds the token; the
// fork points are listed; a POST carrying the token ends the session, and
// Serve returns.
func ExampleServe() {
	greet := replay.Tool("greet", func(_ context.Context, name string) (string, error) { return "hello " + name, nil })
	agent := replay.Typed(func(ctx context.Context, name string) (string, error) { return greet(ctx, name) })
	rec, err := replay.Record(context.Background(), "greeter", "ada", agent)
	if err != nil {
		panic(err)
	}
	urls := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- explore.Serve(context.Background(), explore.Config{Base: rec.Trace, Agent: agent, Test: "TestGreeter"},
			func(url string) { urls <- url })
	}()
	url := <-urls
	resp, err := http.Get(url + "api/points")
	if err != nil {
		panic(err)
	}
	var points []struct{ Description string }
	json.NewDecoder(resp.Body).Decode(&points)
	resp.Body.Close()
	for _, p := range points {
		fmt.Println(p.Description)
	}
	req, _ := http.NewRequest(http.MethodPost, url+"api/end", strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Stepfork-Token", strings.Split(url, "/")[4])
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	fmt.Println("ended:", <-done)
	// Output:
	// before tool 'greet' call 1
	// at the run's end
	// ended: <nil>
}
