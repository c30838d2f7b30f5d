//! The body of a streaming Messages request, as types that borrow from the history: it is
//! built for every call from the whole conversation, so nothing in it is copied (the system
//! prompt, the tool schemas, every message) and it is serialized straight to bytes.
//!
//! Turns map to messages (tool results and steering become user content, consecutive
//! same-role messages are merged, thinking blocks are sent back verbatim to the API that made
//! them), and the last tool and the last block of the last user message carry the cache
//! breakpoints.

use super::super::Request;
use crate::tools::ToolDefinition;
use agentd_proto::{
    ImageData, ProviderKind, ReasoningBlock, ReasoningEffort, ToolCall, ToolCallId, ToolResult,
    Turn,
};
use serde::Serialize;
use serde_json::Value;

/// The JSON body of a streaming Messages request.
#[derive(Serialize)]
pub(super) struct Body<'a> {
    model: &'a str,
    max_tokens: u32,
    stream: bool,
    system: [Block<'a>; 1],
    messages: Vec<Message<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<Typed>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<Thinking>,
}

/// `{"type": ...}`: a cache breakpoint, the tool choice.
#[derive(Serialize)]
struct Typed {
    #[serde(rename = "type")]
    kind: &'static str,
}

const EPHEMERAL: Typed = Typed { kind: "ephemeral" };
const AUTO: Typed = Typed { kind: "auto" };

#[derive(Serialize)]
#[serde(tag = "type", rename = "enabled")]
struct Thinking {
    budget_tokens: u32,
}

#[derive(Serialize)]
struct Tool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<Typed>,
}

#[derive(Serialize)]
pub(super) struct Message<'a> {
    role: &'static str,
    content: Vec<Block<'a>>,
}

/// A content block, with the cache breakpoint any block may carry.
#[derive(Serialize)]
struct Block<'a> {
    #[serde(flatten)]
    content: Content<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<Typed>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Content<'a> {
    Text {
        text: &'a str,
    },
    Image {
        source: ImageSource<'a>,
    },
    Thinking {
        thinking: &'a str,
        signature: &'a str,
    },
    RedactedThinking {
        data: &'a str,
    },
    ToolUse {
        id: &'a ToolCallId,
        name: &'a str,
        input: Input<'a>,
    },
    ToolResult {
        tool_use_id: &'a ToolCallId,
        content: ResultContent<'a>,
        is_error: bool,
    },
}

#[derive(Serialize)]
#[serde(tag = "type", rename = "base64")]
struct ImageSource<'a> {
    media_type: &'a str,
    data: &'a str,
}

/// A call's arguments: the model's object, or `{}` when it sent something else.
#[derive(Serialize)]
#[serde(untagged)]
enum Input<'a> {
    Object(&'a Value),
    Empty {},
}

/// A tool result's content: its text, or its text and images as blocks.
#[derive(Serialize)]
#[serde(untagged)]
enum ResultContent<'a> {
    Text(&'a str),
    Blocks(Vec<Block<'a>>),
}

impl<'a> Block<'a> {
    fn new(content: Content<'a>) -> Self {
        Self {
            content,
            cache_control: None,
        }
    }

    fn text(text: &'a str) -> Self {
        Self::new(Content::Text { text })
    }

    /// An image block, in a user message or a tool result.
    fn image(i: &'a ImageData) -> Self {
        Self::new(Content::Image {
            source: ImageSource {
                media_type: &i.media_type,
                data: &i.data,
            },
        })
    }

    fn reasoning(r: &'a ReasoningBlock) -> Self {
        Self::new(match &r.redacted {
            Some(data) => Content::RedactedThinking { data },
            None => Content::Thinking {
                thinking: &r.text,
                signature: r.signature.as_deref().unwrap_or_default(),
            },
        })
    }

    fn tool_use(call: &'a ToolCall) -> Self {
        Self::new(Content::ToolUse {
            id: &call.id,
            name: &call.name,
            input: if call.arguments.is_object() {
                Input::Object(&call.arguments)
            } else {
                Input::Empty {}
            },
        })
    }

    fn tool_result(r: &'a ToolResult) -> Self {
        let content = if r.images.is_empty() {
            ResultContent::Text(&r.content)
        } else {
            let mut blocks = vec![Block::text(&r.content)];
            blocks.extend(r.images.iter().map(Block::image));
            ResultContent::Blocks(blocks)
        };
        Self::new(Content::ToolResult {
            tool_use_id: &r.call_id,
            content,
            is_error: r.is_error,
        })
    }
}

fn thinking_budget(effort: ReasoningEffort, max_tokens: u32) -> Option<u32> {
    let wanted = match effort {
        ReasoningEffort::Low => 1024,
        ReasoningEffort::Medium => 8192,
        ReasoningEffort::High => 24_576,
    };
    // The API wants 1024 <= budget < max_tokens.
    let budget = wanted.min(max_tokens.saturating_sub(1024));
    (budget >= 1024).then_some(budget)
}

/// The body of `request`.
pub(super) fn body<'a>(request: &'a Request<'a>) -> Body<'a> {
    let mut tools: Vec<Tool<'a>> = request.tools.iter().map(|t| tool(t)).collect();
    if let Some(last) = tools.last_mut() {
        last.cache_control = Some(EPHEMERAL);
    }
    let mut messages = messages(request.history);
    if let Some(block) = messages
        .iter_mut()
        .rev()
        .find(|m| m.role == "user")
        .and_then(|m| m.content.last_mut())
    {
        block.cache_control = Some(EPHEMERAL);
    }
    let mut system = Block::text(request.system);
    system.cache_control = Some(EPHEMERAL);
    Body {
        model: request.model,
        max_tokens: request.max_output_tokens,
        stream: true,
        system: [system],
        messages,
        tool_choice: (!tools.is_empty()).then_some(AUTO),
        tools,
        thinking: request
            .reasoning_effort
            .and_then(|e| thinking_budget(e, request.max_output_tokens))
            .map(|budget_tokens| Thinking { budget_tokens }),
    }
}

fn tool(t: &ToolDefinition) -> Tool<'_> {
    Tool {
        name: &t.name,
        description: &t.description,
        input_schema: &t.parameters,
        cache_control: None,
    }
}

/// The history as messages, consecutive ones of the same role merged.
pub(super) fn messages<'a>(history: &[&'a Turn]) -> Vec<Message<'a>> {
    let mut out: Vec<Message<'a>> = Vec::new();
    let mut push = |role: &'static str, blocks: Vec<Block<'a>>| {
        if blocks.is_empty() {
            return;
        }
        match out.last_mut() {
            Some(last) if last.role == role => last.content.extend(blocks),
            _ => out.push(Message {
                role,
                content: blocks,
            }),
        }
    };
    for turn in history {
        match turn {
            Turn::User { images, .. } | Turn::Steering { images, .. } => {
                let text = turn.model_text();
                // Images before the text they go with, as Anthropic's guide advises.
                let mut blocks: Vec<Block<'a>> = images.iter().map(Block::image).collect();
                if !text.is_empty() || blocks.is_empty() {
                    blocks.push(Block::text(text));
                }
                push("user", blocks);
            }
            Turn::System { text } | Turn::Compaction { summary: text, .. } => {
                push("user", vec![Block::text(text)]);
            }
            Turn::Assistant {
                text,
                reasoning,
                tool_calls,
                api,
                ..
            } => {
                // Thinking signatures are only valid for the API that made them.
                let own = *api == Some(ProviderKind::Anthropic);
                let mut blocks: Vec<Block<'a>> = reasoning
                    .iter()
                    .filter(|_| own)
                    .map(Block::reasoning)
                    .collect();
                if !text.is_empty() {
                    blocks.push(Block::text(text));
                }
                blocks.extend(tool_calls.iter().map(Block::tool_use));
                push("assistant", blocks);
            }
            Turn::ToolResults { results } => {
                push("user", results.iter().map(Block::tool_result).collect());
            }
        }
    }
    out
}
