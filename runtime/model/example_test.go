package model_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime/model"
	"github.com/troupe-dev/troupe/runtime/model/scripted"
)

// This example stands an httptest server in for OpenAI, so that it runs
// offline. Against OpenAI itself, use model.New(model.ConfigFromEnv()).
func ExampleNew() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{
		  "id": "resp_1", "object": "response", "status": "completed", "model": "gpt-4.1",
		  "output": [{"type": "function_call", "id": "fc_1", "call_id": "call_1",
		              "name": "weather", "arguments": "{\"city\":\"Paris\"}"}],
		  "usage": {"input_tokens": 42, "output_tokens": 9, "total_tokens": 51}
		}`)
	}))
	defer srv.Close()

	m, err := model.New(model.Config{BaseURL: srv.URL + "/v1", APIKey: "sk-example"})
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := m.Respond(context.Background(), model.Request{
		Instructions: "You answer questions about the weather.",
		Input:        []agents.Item{agents.UserMessage("Is it sunny in Paris?")},
		Tools: []agents.ToolSpec{{
			Name:        "weather",
			Description: "Returns the current weather of a city.",
			Parameters:  json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`),
			Strict:      true,
		}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, it := range res.Output {
		fmt.Printf("%s %s(%s) call_id=%s\n", it.Type, it.Name, it.Arguments, it.CallID)
	}
	fmt.Printf("tokens: %d in, %d out\n", res.Usage.InputTokens, res.Usage.OutputTokens)
	// Output:
	// function_call weather({"city":"Paris"}) call_id=call_1
	// tokens: 42 in, 9 out
}

// IsRetryable tells the activity layer whether Temporal should try a
// failed call again.
func ExampleIsRetryable() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, `{"error": {"type": "requests", "code": "rate_limit_exceeded", "message": "Slow down."}}`)
	}))
	defer srv.Close()

	m, _ := model.New(model.Config{API: model.APIChat, BaseURL: srv.URL})
	_, err := m.Respond(context.Background(), model.Request{Input: []agents.Item{agents.UserMessage("hi")}})
	fmt.Println(err)
	fmt.Println("retryable:", model.IsRetryable(err))
	// Output:
	// model: HTTP 429 requests: Slow down.
	// retryable: true
}

// WithDeltas shows a turn's text as the model generates it; Respond still
// returns the whole turn. The scripted model server stands in for OpenAI
// here, streaming its answer in pieces of 16 bytes.
func ExampleWithDeltas() {
	sc, err := scripted.ParseScenario([]byte(`rules: [{name: hello, respond: {text: "Hello there, streaming world!"}}]`))
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := scripted.New(sc)
	base, err := srv.Start("")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()

	m, err := model.New(model.Config{BaseURL: base, APIKey: "sk-example"})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := model.WithDeltas(context.Background(), func(d model.Delta) {
		fmt.Printf("item %d: %q\n", d.Item, d.Text)
	})
	res, err := m.Respond(ctx, model.Request{Input: []agents.Item{agents.UserMessage("hi")}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Output[0].Content)
	// Output:
	// item 0: "Hello there, str"
	// item 0: "eaming world!"
	// Hello there, streaming world!
}
