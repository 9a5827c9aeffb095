package eino_test

import (
	"context"
	"fmt"

	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/schema"
	sfeino "github.com/stepfork/stepfork/contrib/eino"
	"github.com/stepfork/stepfork/replay"
)

// echoModel answers with the user's last message, counting its calls.
type echoModel struct{ calls int }

func (e *echoModel) Generate(_ context.Context, in []*schema.Message, _ ...model.Option) (*schema.Message, error) {
	e.calls++
	return schema.AssistantMessage("you said: "+in[len(in)-1].Content, nil), nil
}

func (e *echoModel) Stream(ctx context.Context, in []*schema.Message, opts ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	m, err := e.Generate(ctx, in, opts...)
	return schema.StreamReaderFromArray([]*schema.Message{m}), err
}

// A wrapped Eino model is recorded as a model call and served on replay.
func ExampleModel() {
	inner := &echoModel{}
	chat := sfeino.Model("local", "echo-1", inner)
	agent := replay.Typed(func(ctx context.Context, text string) (string, error) {
		out, err := chat.Generate(ctx, []*schema.Message{schema.UserMessage(text)}, model.WithTemperature(0))
		if err != nil {
			return "", err
		}
		return out.Content, nil
	})
	ctx := context.Background()
	rec, _ := replay.Record(ctx, "echo", "hello", agent)
	res, _ := replay.Replay(ctx, rec.Trace, agent)
	fmt.Println(res.Output, "— model called", inner.calls, "time(s)")
	fmt.Println(rec.Trace.Events[1].Type, rec.Trace.Events[1].Provider+"/"+rec.Trace.Events[1].Model)
	// Output:
	// you said: hello — model called 1 time(s)
	// llm_request local/echo-1
}
