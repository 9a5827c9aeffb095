// Package langchaingo records and replays the tools of a langchaingo agent
// (github.com/tmc/langchaingo), with one line where the tools are listed:
//
//	executor := agents.NewExecutor(agents.NewOpenAIFunctionsAgent(llm, sflcg.Tools(weather, calculator)))
//
// Each tool call is a tool call of the run named after the tool. The
// agent's model calls are recorded at the wire: give langchaingo's OpenAI
// client an http.Client whose transport is replay.Transport,
//
//	llm, err := openai.New(openai.WithHTTPClient(&http.Client{Transport: replay.Transport(nil)}))
//
// so that a frozen replay sends no request, and fork.Prompt, fork.Model and
// fork.Temperature patch the request body the API reads.
package langchaingo
