package scripted_test

import (
	"context"
	"fmt"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/troupe-dev/troupe/runtime/model/scripted"
)

// A two-turn conversation over the Responses API: the scenario makes the
// model call a tool, then quote the tool's output in its answer.
func ExampleServer_Start() {
	sc, err := scripted.ParseScenario([]byte(`
rules:
  - name: look-up-price
    match: {instructions: pricing, turn: 1}
    respond:
      calls: [{name: get_price, arguments: {sku: "{{.User}}"}}]
  - name: answer
    match: {instructions: pricing, turn: 2}
    respond:
      text: 'The price is {{field .LastOutput "amount"}} {{field .LastOutput "currency"}}.'
`))
	if err != nil {
		panic(err)
	}
	server := scripted.New(sc)
	baseURL, err := server.Start("127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer server.Close()

	client := openai.NewClient(option.WithBaseURL(baseURL), option.WithAPIKey("any-key"), option.WithMaxRetries(0))
	ctx := context.Background()
	params := responses.ResponseNewParams{
		Model:        "gpt-4.1",
		Instructions: openai.String("You answer pricing questions."),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("SKU-42", responses.EasyInputMessageRoleUser),
		}},
		Tools: []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{
			Name:   "get_price",
			Strict: openai.Bool(true),
			Parameters: map[string]any{
				"type":                 "object",
				"properties":           map[string]any{"sku": map[string]any{"type": "string"}},
				"required":             []string{"sku"},
				"additionalProperties": false,
			},
		}}},
	}

	first, err := client.Responses.New(ctx, params)
	if err != nil {
		panic(err)
	}
	call := first.Output[0].AsFunctionCall()
	fmt.Printf("turn 1: %s(%s)\n", call.Name, call.Arguments)

	// Run the tool, then send the call and its output back.
	params.Input.OfInputItemList = append(params.Input.OfInputItemList,
		responses.ResponseInputItemParamOfFunctionCall(call.Arguments, call.CallID, call.Name),
		responses.ResponseInputItemUnionParam{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
			CallID: openai.String(call.CallID),
			Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{
				OfString: openai.String(`{"amount": 120, "currency": "EUR"}`),
			},
		}},
	)
	second, err := client.Responses.New(ctx, params)
	if err != nil {
		panic(err)
	}
	fmt.Println("turn 2:", second.OutputText())
	fmt.Println("answered by look-up-price:", server.Count("look-up-price"), "answer:", server.Count("answer"))
	// Output:
	// turn 1: get_price({"sku":"SKU-42"})
	// turn 2: The price is 120 EUR.
	// answered by look-up-price: 1 answer: 1
}

// Chat Completions, streamed and read with openai-go's accumulator.
func Example_chatCompletionsStreaming() {
	sc, err := scripted.ParseScenario([]byte(`
rules:
  - name: greet
    match: {input: "(?i)hello"}
    respond: {text: "Hello, {{.User}}! This answer arrives in several chunks."}
`))
	if err != nil {
		panic(err)
	}
	server := scripted.New(sc)
	baseURL, err := server.Start("127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer server.Close()

	client := openai.NewClient(option.WithBaseURL(baseURL), option.WithAPIKey("any-key"), option.WithMaxRetries(0))
	stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model:    "llama3",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello world")},
	})
	acc := openai.ChatCompletionAccumulator{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		panic(err)
	}
	fmt.Println(acc.Choices[0].Message.Content)
	fmt.Println("finish:", acc.Choices[0].FinishReason)
	// Output:
	// Hello, hello world! This answer arrives in several chunks.
	// finish: stop
}

// A scenario error names the rule at fault.
func ExampleParseScenario() {
	_, err := scripted.ParseScenario([]byte(`
rules:
  - name: broken
    respond:
      text: "hi"
      calls: [{name: f}]
`))
	fmt.Println(err)
	// Output:
	// scripted: rule 0 "broken": respond: exactly one of text, json and calls must be set, got 2
}
