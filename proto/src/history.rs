//! The conversation as stored and as returned by `session/history`: a list of entries, each
//! holding one [`Turn`] (spec 2.4).

use crate::names::names;
use crate::{EntryId, InputId, ToolCallId};

names! {
    /// An LLM API family.
    pub enum ProviderKind ("provider kind") {
        /// Anthropic Messages (`/v1/messages`).
        Anthropic = "anthropic",
        /// OpenAI Responses (`/v1/responses`).
        Openai = "openai",
        /// OpenAI-compatible Chat Completions (`/v1/chat/completions`): OpenAI, Ollama, vLLM,
        /// llama.cpp, LM Studio, OpenRouter, DeepSeek, Groq...
        OpenaiChat = "openai_chat",
        /// Google Gemini (`streamGenerateContent?alt=sse`).
        Gemini = "gemini",
    }
}

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Token counts for one LLM call, or summed over a session.
///
/// Some servers (local OpenAI-compatible ones especially) report no usage at all. Such a call
/// counts as `unreported_calls: 1` with zero tokens and no cost: its usage is *unknown*, not
/// zero. In a sum, `unreported_calls > 0` means the token counts and cost are lower bounds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Usage {
    /// Input tokens that were not read from the provider's cache.
    pub input_tokens: u64,
    /// Output tokens, reasoning included.
    pub output_tokens: u64,
    /// Input tokens read from the provider's prompt cache.
    #[serde(default)]
    pub cache_read_tokens: u64,
    /// Input tokens written to the provider's prompt cache.
    #[serde(default)]
    pub cache_write_tokens: u64,
    /// Output tokens spent on reasoning, where the provider reports them.
    #[serde(default)]
    pub reasoning_tokens: u64,
    /// Cost in US dollars, when the daemon's config has a price for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// LLM calls whose server reported no usage, so their tokens are unknown and not counted
    /// above (absent when 0). On one call's usage: 1 when that call's usage is unknown.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unreported_calls: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Usage {
    /// Adds `other` to `self`, field by field.
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        self.reasoning_tokens += other.reasoning_tokens;
        self.unreported_calls += other.unreported_calls;
        if let Some(cost) = other.cost_usd {
            *self.cost_usd.get_or_insert(0.0) += cost;
        }
    }
}

/// One tool invocation requested by the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolCall {
    /// The provider's id for this call.
    pub id: ToolCallId,
    /// The tool's name.
    pub name: String,
    /// The arguments as the model sent them (a JSON object when well-formed).
    pub arguments: serde_json::Value,
    /// An opaque signature the provider attached to the call (Gemini's `thoughtSignature`),
    /// sent back with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// An image: one the user sent with an input, or one a tool returned to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ImageData {
    /// `image/png`, `image/jpeg`, `image/gif` or `image/webp`.
    pub media_type: String,
    /// The image, base64-encoded.
    pub data: String,
}

/// The outcome of one tool call, as the model sees it (possibly truncated).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolResult {
    /// The call this answers.
    pub call_id: ToolCallId,
    /// The output or error text sent to the model.
    pub content: String,
    /// Whether the call failed.
    pub is_error: bool,
    /// Images for models that take them (`read_file` on an image).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<ImageData>,
}

/// A block of model reasoning, kept verbatim so it can be sent back to the provider that made
/// it (Anthropic requires thinking blocks and their signatures unchanged).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ReasoningBlock {
    /// The provider's id for the block (an OpenAI reasoning item's `rs_...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The reasoning text, empty when the provider hides it.
    pub text: String,
    /// The provider's signature over the block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// Opaque redacted or encrypted content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redacted: Option<String>,
}

/// One entry of the conversation (spec 2.4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Turn {
    /// What the user submitted.
    User {
        /// The input's text.
        text: String,
        /// The input's id.
        input_id: InputId,
        /// Images sent with the text, in order.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<ImageData>,
        /// What the model was given instead of `text`: a prompt command's expansion, or
        /// `text` after the instructions of the skills it named (absent: `text` as typed).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expanded: Option<String>,
    },
    /// One model response.
    Assistant {
        /// The text the model wrote.
        text: String,
        /// Reasoning blocks, in the order the model produced them.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        reasoning: Vec<ReasoningBlock>,
        /// Tool calls the model requested.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
        /// Token counts of this call.
        usage: Usage,
        /// The provider's response id.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        response_id: Option<String>,
        /// The model that answered.
        model: String,
        /// The API that produced it; reasoning blocks and signatures are sent back only to
        /// the same API.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        api: Option<ProviderKind>,
    },
    /// Results of the tool calls of the preceding assistant turn, in call order.
    ToolResults {
        /// One result per call.
        results: Vec<ToolResult>,
    },
    /// A message injected between tool rounds; the model sees it as a user message.
    Steering {
        /// The message.
        text: String,
        /// The input's id, when it came from a client rather than loop detection.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        input_id: Option<InputId>,
        /// Images sent with the message, in order.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<ImageData>,
    },
    /// A note from the daemon recorded in the conversation (for example an interrupted turn).
    System {
        /// The note.
        text: String,
    },
    /// A summary standing in for the entries before `first_kept` on this branch. The model
    /// sees the summary, then the entries from `first_kept` on; the summarized entries stay
    /// in the tree.
    Compaction {
        /// The summary, as the model sees it.
        summary: String,
        /// The oldest entry kept as it is.
        first_kept: EntryId,
        /// Estimated context tokens before the compaction.
        tokens_before: u64,
    },
}

impl Turn {
    /// A user's or the daemon's text as the model is given it: a user input's `expanded`
    /// text when it has one.
    pub fn model_text(&self) -> &str {
        match self {
            Turn::User { text, expanded, .. } => expanded.as_deref().unwrap_or(text),
            Turn::Steering { text, .. } | Turn::System { text } | Turn::Assistant { text, .. } => {
                text
            }
            Turn::Compaction { summary, .. } => summary,
            Turn::ToolResults { .. } => "",
        }
    }
}

/// One entry of a session's history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HistoryEntry {
    /// This entry's id.
    pub id: EntryId,
    /// The entry before it on this branch; `None` for the first.
    pub parent_id: Option<EntryId>,
    /// When it was recorded (RFC 3339).
    pub ts: String,
    /// The turn.
    #[serde(flatten)]
    pub turn: Turn,
}
