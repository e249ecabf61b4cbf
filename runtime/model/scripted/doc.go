// Package scripted is an offline stand-in for the OpenAI API: an HTTP server
// that answers Responses (POST /v1/responses) and Chat Completions
// (POST /v1/chat/completions) requests, streamed or not, from a scenario
// file, so agent graphs can be tested and demonstrated without a model.
// It speaks the wire format that openai-go and other OpenAI-compatible
// clients parse, and it imports nothing else of Troupe.
//
// # Contract
//
// For every request the server:
//
//  1. Requires an Authorization: Bearer header with any non-empty key
//     (401 otherwise).
//  2. With limits (WithLimits), answers 429 past them as OpenAI does
//     (type "requests", code "rate_limit_exceeded", retry-after-ms,
//     Retry-After and x-ratelimit-* headers), counting every model request
//     as it arrives (Server.Stats: the most at once, the most in a window,
//     those turned away).
//  3. Rejects, with 400 and OpenAI's error shape
//     {"error":{"message","type":"invalid_request_error","param","code"}},
//     what the real API rejects: a missing model or input, mistyped fields,
//     tool names outside ^[a-zA-Z0-9_-]{1,64}$ or used twice, strict tools or
//     strict structured-output schemas that strict mode does not accept
//     (every object needs additionalProperties: false, properties, and all
//     of its properties in required; the root must be an object), function
//     calls in the input without their outputs, and outputs without their
//     calls. Messages follow OpenAI's, so a test sees what production would.
//  4. Picks the first rule of the scenario whose match holds, or answers 400
//     with code "scripted_no_match", a message naming the turn, the
//     instructions, the last input and the tools, so the scenario's author
//     can add the missing rule, and as param the scenario file to add it
//     to (the source of the rules for the request's agent, when known).
//     A client tells this answer from the API's own by its code.
//  5. Rejects (400, "scripted_unknown_tool") a rule that would call a tool
//     the request does not offer, or one its tool_choice rules out ("none",
//     a forced function, allowed_tools), since a real model cannot do that.
//     Calls in the input history to tools no longer offered (after a
//     handoff, say) are fine.
//  6. Waits the rule's delay_ms, renders its templates, and answers with a
//     message (text or json) or with function calls (several calls are
//     parallel tool calls). Ids are derived from the request's content, so a
//     retry of the same request gets the same call ids; usage counts about a
//     token per four characters.
//  7. Records the answer (Server.Calls, Server.Count, Server.Requests).
//
// The server stores nothing: previous_response_id, conversation and prompt
// are rejected, and each request must carry the whole conversation. Unknown
// request fields are ignored, as new API fields should not break tests.
//
// # Scenario
//
// A scenario is YAML or JSON:
//
//	intents:                       # what users ask, in their words
//	  fix: ["fix|repair|patch", "make|get it|this work*"]
//	rules:                         # in order; the first match wins
//	  - name: triage-hands-off     # required, unique
//	    match:                     # all conditions given must hold
//	      instructions: "triage"   # substring of the system instructions
//	      tools: [transfer_to_coordinator]  # offered by the request
//	      no_tools: [x]            # not offered
//	      turn: 1                  # or min_turn / max_turn
//	      last_input: "regexp"     # text of the last input item
//	      input: "regexp"          # text of the first user message
//	      has_output_schema: true  # a json_schema output format is requested
//	      intent: fix              # the user just spoke, and has the intent
//	    respond:                   # exactly one of text, json, calls
//	      text: "Hello {{.User}}"  # a Go text/template
//	      json: {risk: '{{field .LastOutput "risk_level"}}'}
//	      calls:
//	        - name: get_document
//	          arguments: {doc: pricing}
//	      delay_ms: 0
//	      pace_ms: 0               # between streamed text pieces
//
// An intent is a list of alternatives; an alternative is a list of terms
// that must all be words of the message, in any order; a term is synonyms
// separated by "|" ("*" ends a prefix); case does not matter. So "fix"
// above holds for "Please repair the finding" and for "make this work",
// and a scenario answers what users mean, not one sentence. An intent
// holds only when the last input item is a user message.
//
// The turn of a request is 1 plus the number of model turns in its input,
// a model turn being a maximal run of assistant-side items (assistant
// messages, function calls, reasoning). Templates see TemplateData
// (.Instructions, .User, .LastUser, .LastInput, .LastOutput, .Outputs,
// .Turn, .CallIndex) and the functions field (a gjson path into a JSON
// string), json, join, after and before (the text after or before a
// marker, e.g. the output part of an exec_command result), match (the
// first submatch of a regexp), matches (every distinct submatch, joined)
// and add (a sum of integers, e.g. to
// count turns from a tool's output once a trimmed context no longer shows
// them all, since .Turn counts the model turns in the input).
//
// # Streaming
//
// With "stream": true, Responses answers are the events response.created,
// response.in_progress, response.output_item.added,
// response.content_part.added, response.output_text.delta,
// response.output_text.done, response.content_part.done (for a message) or
// response.function_call_arguments.delta and .done (for a call),
// response.output_item.done, and response.completed. Chat answers are
// chat.completion.chunk objects ending with data: [DONE]; a usage chunk is
// sent when stream_options.include_usage is true.
package scripted
