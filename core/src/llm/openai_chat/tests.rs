//! Replays the recorded Chat Completions streams (OpenAI, llama-cpp-python, DeepSeek, Groq, a
//! vLLM-backed endpoint, Anthropic's compatible endpoint) through the decoder.

use super::*;
use crate::llm::fixtures::{self, Framing};
use serde_json::json;

fn decode(name: &str) -> (Result<Response, Error>, Vec<Delta>) {
    let bytes = fixtures::load("openai-chat", name, Framing::DataDone).remove(0);
    fixtures::decode(
        bytes,
        &OpenAiChat::new(fixtures::http(), "http://unused", None),
    )
}

fn call(id: &str, name: &str, arguments: Value) -> ToolCall {
    ToolCall {
        id: ToolCallId(id.into()),
        name: name.into(),
        arguments,
        signature: None,
    }
}

fn usage(input: u64, output: u64, cached: u64, reasoning: u64) -> Option<Usage> {
    Some(Usage {
        input_tokens: input,
        output_tokens: output,
        cache_read_tokens: cached,
        cache_write_tokens: 0,
        reasoning_tokens: reasoning,
        ..Usage::default()
    })
}

/// Checks tool calls, text, usage and stop reason of one recording.
fn check(
    name: &str,
    text: &str,
    calls: Vec<ToolCall>,
    expect_usage: Option<Usage>,
    stop: StopReason,
) {
    let (got, deltas) = decode(name);
    let got = got.unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(got.text, text, "{name}");
    assert_eq!(fixtures::streamed_text(&deltas), text, "{name}");
    assert_eq!(got.tool_calls, calls, "{name}");
    assert_eq!(got.usage, expect_usage, "{name}");
    assert_eq!(got.stop_reason, Some(stop), "{name}");
}

#[test]
fn openai_text_only() {
    check(
        "openai-python__gpt-4o_text-only__e2aad469b71d.sse.txt",
        "I'm unable to provide real-time weather updates. To get the current weather in San Francisco, I recommend checking a reliable weather website or a weather app.",
        vec![],
        usage(14, 30, 0, 0),
        StopReason::EndTurn,
    );
}

#[test]
fn openai_single_tool_call() {
    check(
        "openai-python__gpt-4o_single-tool-call_non-strict__2018feb66ae1.sse.txt",
        "",
        vec![call(
            "call_4XzlGBLtUe9dy3GVNV4jhq7h",
            "get_weather",
            json!({"city": "New York City"}),
        )],
        usage(44, 16, 0, 0),
        StopReason::ToolUse,
    );
}

#[test]
fn openai_two_parallel_tool_calls() {
    check(
        "openai-python__gpt-4o_two-parallel-tool-calls__f82268f2fefd.sse.txt",
        "",
        vec![
            call(
                "call_JMW1whyEaYG438VE1OIflxA2",
                "GetWeatherArgs",
                json!({"city": "Edinburgh", "country": "GB", "units": "c"}),
            ),
            call(
                "call_DNYTawLBoN8fj3KN6qU9N1Ou",
                "get_stock_price",
                json!({"ticker": "AAPL", "exchange": "NASDAQ"}),
            ),
        ],
        usage(149, 60, 0, 0),
        StopReason::ToolUse,
    );
}

#[test]
fn llama_cpp_python_repeats_id_and_name_on_every_fragment() {
    check(
        "LOCAL-RECORDED__llama-cpp-python-0.3.36_gemma3-270m_forced-tool-call.sse.txt",
        "",
        vec![call(
            "call__0_read_file_cmpl-5427932c-539a-48b9-9800-f6c8ec58de61",
            "read_file",
            json!({"path": "README.md"}),
        )],
        None,
        StopReason::ToolUse,
    );
}

#[test]
fn deepseek_reasoning_content_and_usage_on_the_finish_chunk() {
    let (got, deltas) = decode("vercel-ai__deepseek-tool-call.chunks.txt");
    let got = got.unwrap();
    assert_eq!(
        got.tool_calls,
        vec![call(
            "call_00_ioIn7yN9p1ZOMNpDLwd4MgAF",
            "weather",
            json!({"location": "San Francisco"})
        )]
    );
    assert_eq!(got.usage, usage(19, 83, 320, 39));
    assert_eq!(got.reasoning.len(), 1);
    assert!(
        got.reasoning[0]
            .text
            .starts_with("The user is asking for the weather in San Francisco. I need ")
    );
    assert_eq!(got.reasoning[0].text.chars().count(), 191);
    assert!(deltas.iter().any(|d| matches!(d, Delta::Reasoning(_))));
}

#[test]
fn groq_sends_the_whole_call_at_once() {
    check(
        "vercel-ai__groq-tool-call.chunks.txt",
        "",
        vec![call("tk85n1k4m", "weather", json!({}))],
        usage(210, 15, 0, 0),
        StopReason::ToolUse,
    );
}

#[test]
fn vllm_style_repeats_empty_name_without_id() {
    check(
        "vercel-ai__mistral-incremental-tool-call.chunks.txt",
        "",
        vec![call(
            "chatcmpl-tool-9f149c74c42f265b",
            "webSearchTool",
            json!({"query": "current Berlin weather"}),
        )],
        usage(43, 14, 128, 0),
        StopReason::ToolUse,
    );
}

#[test]
fn anthropic_compatible_endpoint_starts_tool_indexes_at_one() {
    check(
        "vercel-ai__openai-compatible__anthropic-fallback-tool-call.sse.txt",
        "Reading it.",
        vec![call(
            "toolu_sanitized",
            "read_file",
            json!({"path": "a.txt"}),
        )],
        None,
        StopReason::ToolUse,
    );
}

fn sse(chunks: &[Value], done: bool) -> Vec<u8> {
    let mut s: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    if done {
        s.push_str("data: [DONE]\n\n");
    }
    s.into_bytes()
}

#[test]
fn a_reused_index_with_a_new_id_is_a_new_call_and_missing_arguments_mean_empty() {
    let chunks = [
        json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "a", "function": {"name": "one"}}]}}]}),
        json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "b", "function": {"name": "two", "arguments": "{\"x\":1}"}}]}}]}),
        json!({"choices": [{"delta": {}, "finish_reason": "stop"}]}),
    ];
    let got = fixtures::decode(
        sse(&chunks, true),
        &OpenAiChat::new(fixtures::http(), "http://unused", None),
    )
    .0
    .unwrap();
    assert_eq!(
        got.tool_calls,
        vec![
            call("a", "one", json!({})),
            call("b", "two", json!({"x": 1}))
        ]
    );
    // finish_reason said "stop", but the calls decide.
    assert_eq!(got.stop_reason, Some(StopReason::EndTurn));
}

/// Issue 11: llama-cpp-python ended a stream with `[DONE]` after only the role chunk; it was
/// recorded as an empty, completed answer.
#[test]
fn done_without_any_finish_reason_is_incomplete() {
    let role_only = [
        json!({"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": null}]}),
    ];
    let with_text = [
        json!({"choices": [{"delta": {"role": "assistant", "content": null}, "finish_reason": null}]}),
        json!({"choices": [{"delta": {"content": "partial"}, "finish_reason": null}]}),
    ];
    for chunks in [&role_only[..], &with_text[..]] {
        let err = fixtures::decode(
            sse(chunks, true),
            &OpenAiChat::new(fixtures::http(), "http://unused", None),
        )
        .0
        .unwrap_err();
        assert_eq!(
            (err.kind, err.message.as_str()),
            (
                ErrorKind::Incomplete,
                "the response stream ended without a finish_reason (incomplete response)"
            )
        );
        assert!(
            err.is_retryable(),
            "retried while no delta reached a client"
        );
    }
}

#[test]
fn eof_without_done_or_finish_is_truncation_and_error_chunks_are_errors() {
    let partial = [json!({"choices": [{"delta": {"content": "half"}}]})];
    let err = fixtures::decode(
        sse(&partial, false),
        &OpenAiChat::new(fixtures::http(), "http://unused", None),
    )
    .0
    .unwrap_err();
    assert_eq!(
        err.message,
        "the response stream ended before [DONE] (truncated response)"
    );
    let finished = [json!({"choices": [{"delta": {"content": "all"}, "finish_reason": "stop"}]})];
    assert_eq!(
        fixtures::decode(
            sse(&finished, false),
            &OpenAiChat::new(fixtures::http(), "http://unused", None)
        )
        .0
        .unwrap()
        .text,
        "all"
    );
    let error = [json!({"error": {"message": "model overloaded", "type": "server_error"}})];
    let err = fixtures::decode(
        sse(&error, true),
        &OpenAiChat::new(fixtures::http(), "http://unused", None),
    )
    .0
    .unwrap_err();
    assert_eq!(
        err.message,
        "OpenAI-compatible stream error: model overloaded"
    );
}

#[test]
fn history_maps_to_chat_messages() {
    use agentd_proto::{InputId, ToolResult};
    let turns = [
        Turn::User {
            text: "go".into(),
            input_id: InputId("i".into()),
            images: vec![],
            expanded: None,
        },
        Turn::Assistant {
            text: String::new(),
            reasoning: vec![],
            tool_calls: vec![
                call("c1", "shell", json!({"command": "ls"})),
                call("c2", "shell", Value::String("{bad".into())),
            ],
            usage: Usage::default(),
            response_id: None,
            model: "m".into(),
            api: Some(ProviderKind::OpenaiChat),
        },
        Turn::ToolResults {
            results: vec![
                ToolResult {
                    call_id: ToolCallId("c1".into()),
                    content: "a".into(),
                    is_error: false,
                    images: vec![],
                },
                ToolResult {
                    call_id: ToolCallId("c2".into()),
                    content: "bad args".into(),
                    is_error: true,
                    images: vec![],
                },
            ],
        },
    ];
    let refs: Vec<&Turn> = turns.iter().collect();
    assert_eq!(
        history(&refs),
        vec![
            json!({"role": "user", "content": "go"}),
            json!({"role": "assistant", "content": "", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "shell", "arguments": "{\"command\":\"ls\"}"}},
                {"id": "c2", "type": "function", "function": {"name": "shell", "arguments": "{bad"}}]}),
            json!({"role": "tool", "tool_call_id": "c1", "content": "a"}),
            json!({"role": "tool", "tool_call_id": "c2", "content": "bad args"}),
        ]
    );
}

/// A refusal arrives in `delta.refusal` (with `content` null): it is the answer's text and
/// ends the response as a refusal; so does `finish_reason: content_filter`. An empty or null
/// `refusal` beside ordinary text is no refusal.
#[test]
fn a_refusal_field_or_a_content_filter_is_a_refusal() {
    let chat = OpenAiChat::new(fixtures::http(), "http://unused", None);
    let refused = [
        json!({"choices": [{"delta": {"role": "assistant", "content": null, "refusal": ""}}]}),
        json!({"choices": [{"delta": {"content": null, "refusal": "I can't "}}]}),
        json!({"choices": [{"delta": {"content": null, "refusal": "do that."}}]}),
        json!({"choices": [{"delta": {}, "finish_reason": "stop"}]}),
    ];
    let (got, deltas) = fixtures::decode(sse(&refused, true), &chat);
    let got = got.unwrap();
    assert_eq!(got.stop_reason, Some(StopReason::Refusal));
    assert_eq!(got.text, "I can't do that.");
    assert_eq!(fixtures::streamed_text(&deltas), got.text);

    let filtered = [
        json!({"choices": [{"delta": {"content": "Here is"}}]}),
        json!({"choices": [{"delta": {}, "finish_reason": "content_filter"}]}),
    ];
    let got = fixtures::decode(sse(&filtered, true), &chat).0.unwrap();
    assert_eq!(got.stop_reason, Some(StopReason::Refusal));

    let plain = [
        json!({"choices": [{"delta": {"content": "fine", "refusal": null}}]}),
        json!({"choices": [{"delta": {"refusal": ""}, "finish_reason": "stop"}]}),
    ];
    let got = fixtures::decode(sse(&plain, true), &chat).0.unwrap();
    assert_eq!(got.stop_reason, Some(StopReason::EndTurn));
}

#[test]
fn only_openai_itself_gets_the_prompt_cache_key() {
    let request = Request {
        cache_key: Some("s1"),
        ..Request::bare()
    };
    assert_eq!(request_body(&request, true)["prompt_cache_key"], "s1");
    assert!(
        request_body(&request, false)
            .get("prompt_cache_key")
            .is_none()
    );
    let openai = |base: &str| OpenAiChat::new(fixtures::http(), base, None).openai;
    assert!(openai("https://api.openai.com/v1"));
    assert!(!openai("http://127.0.0.1:8080/v1"));
    assert!(!openai("https://api.openai.com.example/v1"));
}
