//! What one incoming message is: a call, a notification, or something to reject with the code
//! for what is wrong. Bytes that are not JSON (or not UTF-8) get -32700; JSON that is not a
//! request object (a bare value, a bad `id`, a missing `method`) gets -32600, and the message
//! says which. Ids are echoed exactly as sent, including negative and arbitrarily large
//! integers, which jsonrpsee's `Id` cannot hold: such a request runs under a stand-in id and
//! its answers get the id as sent back ([`with_raw_id`]).

use jsonrpsee::types::error::{ErrorObject, INVALID_REQUEST_CODE, PARSE_ERROR_CODE};
use jsonrpsee::types::{Id, Request};
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// A request's id as sent, when jsonrpsee's `Id` (null, u64, string) cannot hold it: the
/// request runs under a stand-in string id and the response gets this one back.
pub(super) type RawId = Box<RawValue>;

/// One message, classified.
pub(super) enum Message<'a> {
    /// A request to run, with its own id when it runs under a stand-in.
    Call(Request<'a>, Option<RawId>),
    /// A client notification: run nothing, answer nothing.
    Notification,
    /// Answered with this error under this id (`None`: null).
    Reject(ErrorObject<'static>, Option<RawId>),
}

/// A connection's source of stand-in ids, unique on the connection.
pub(super) struct StandIns {
    conn_id: usize,
    next: AtomicU64,
}

impl StandIns {
    pub(super) fn new(conn_id: usize) -> Self {
        Self {
            conn_id,
            next: AtomicU64::new(0),
        }
    }

    fn next(&self) -> Id<'static> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        Id::Str(Cow::Owned(format!("agentd-id-alias-{}-{n}", self.conn_id)))
    }
}

/// Classifies one message that is not a batch. The common case (a valid request) costs one
/// parse; the rest is diagnosis of what is wrong.
pub(super) fn classify<'a>(bytes: &'a [u8], stand_ins: &StandIns) -> Message<'a> {
    if let Ok(request) = serde_json::from_slice::<Request>(bytes) {
        // jsonrpsee takes any JSON as params; JSON-RPC allows only structured values.
        if request
            .params
            .as_ref()
            .is_some_and(|p| !matches!(p.get().as_bytes().first(), Some(b'{' | b'[')))
        {
            let id = serde_json::value::to_raw_value(&request.id).ok();
            return Message::Reject(
                invalid_request("`params` must be an object or an array"),
                id,
            );
        }
        return Message::Call(request, None);
    }
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => {
            return Message::Reject(
                parse_error(&format!("invalid UTF-8 at byte {}", e.valid_up_to())),
                None,
            );
        }
    };
    // Whole-document syntax first (serde_json bounds nesting depth, so this is bounded too).
    if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(text) {
        return Message::Reject(parse_error(&e.to_string()), None);
    }
    let Ok(object) = serde_json::from_str::<BTreeMap<String, &RawValue>>(text) else {
        let what = match text.trim_start().as_bytes().first() {
            Some(b'"') => "a string",
            Some(b't' | b'f') => "a boolean",
            Some(b'n') => "null",
            _ => "a number",
        };
        return Message::Reject(
            invalid_request(&format!("expected a request object, got {what}")),
            None,
        );
    };
    let id = match object.get("id") {
        None => None,
        Some(raw) => match classify_id(raw) {
            Ok(id) => Some(id),
            Err(why) => return Message::Reject(invalid_request(&why), None),
        },
    };
    let echo = id.as_ref().map(|id| id.raw.clone());
    let version_ok = object
        .get("jsonrpc")
        .is_some_and(|v| serde_json::from_str::<&str>(v.get()).ok() == Some("2.0"));
    if !version_ok {
        return Message::Reject(invalid_request("`jsonrpc` must be \"2.0\""), echo);
    }
    let method = match object
        .get("method")
        .map(|m| serde_json::from_str::<String>(m.get()))
    {
        Some(Ok(m)) => m,
        Some(Err(_)) => {
            return Message::Reject(invalid_request("`method` must be a string"), echo);
        }
        None => return Message::Reject(invalid_request("`method` is missing"), echo),
    };
    let params = object.get("params").copied();
    if params.is_some_and(|p| !matches!(p.get().as_bytes().first(), Some(b'{' | b'[' | b'n'))) {
        return Message::Reject(
            invalid_request("`params` must be an object or an array"),
            echo,
        );
    }
    let Some(id) = id else {
        return Message::Notification;
    };
    let params = params.filter(|p| p.get() != "null").map(|p| p.to_owned());
    match id.native {
        Some(native) => Message::Call(Request::owned(method, params, native), None),
        None => Message::Call(
            Request::owned(method, params, stand_ins.next()),
            Some(id.raw),
        ),
    }
}

struct ClassifiedId {
    /// How jsonrpsee carries it, if it can.
    native: Option<Id<'static>>,
    /// As sent.
    raw: RawId,
}

/// Valid ids are strings, null and integers of any size; fractions, exponents, booleans,
/// objects and arrays are not (JSON-RPC 2.0: "Numbers SHOULD NOT contain fractional parts").
fn classify_id(raw: &RawValue) -> Result<ClassifiedId, String> {
    let text = raw.get();
    let digits = text.strip_prefix('-').unwrap_or(text);
    let native = if text == "null" {
        Some(Id::Null)
    } else if text.starts_with('"') {
        serde_json::from_str::<String>(text)
            .ok()
            .map(|s| Id::Str(Cow::Owned(s)))
    } else if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        // Negative or beyond u64: answered under the id as sent.
        text.parse::<u64>().ok().map(Id::Number)
    } else {
        let what = match text.as_bytes().first() {
            Some(b'{') => "an object".to_owned(),
            Some(b'[') => "an array".to_owned(),
            Some(b't' | b'f') => "a boolean".to_owned(),
            _ => format!("the number {}", clip(text)),
        };
        return Err(format!(
            "`id` must be a string, an integer or null, got {what}"
        ));
    };
    Ok(ClassifiedId {
        native,
        raw: raw.to_owned(),
    })
}

/// The id of a message, as sent, if it has a valid one.
pub(super) fn request_id(bytes: &[u8]) -> Option<RawId> {
    #[derive(serde::Deserialize)]
    struct WithId<'a> {
        #[serde(borrow)]
        id: Option<&'a RawValue>,
    }
    let with_id = serde_json::from_slice::<WithId>(bytes).ok()?;
    classify_id(with_id.id?).ok().map(|id| id.raw)
}

/// The start of every response jsonrpsee serializes: the id follows it.
const RESPONSE_PREFIX: &str = "{\"jsonrpc\":\"2.0\",\"id\":";

/// Puts `id` (as sent) in place of the response's `id`, which is null or a stand-in string
/// without escapes. Text surgery rather than a `serde_json::Value` round trip, because a
/// `Value` cannot hold an integer beyond 64 bits exactly.
pub(super) fn with_raw_id(response: Box<RawValue>, id: Option<RawId>) -> Box<RawValue> {
    let Some(id) = id else {
        return response;
    };
    let json = response.get();
    let Some(rest) = json.strip_prefix(RESPONSE_PREFIX) else {
        return response;
    };
    let rest = if let Some(r) = rest.strip_prefix("null") {
        r
    } else if let Some(r) = rest.strip_prefix('"') {
        match r.find('"') {
            Some(end) => &r[end + 1..],
            None => return response,
        }
    } else {
        return response;
    };
    RawValue::from_string(format!("{RESPONSE_PREFIX}{}{rest}", id.get())).unwrap_or(response)
}

/// -32700, saying why.
pub(super) fn parse_error(why: &str) -> ErrorObject<'static> {
    ErrorObject::owned(PARSE_ERROR_CODE, format!("Parse error: {why}"), None::<()>)
}

/// -32600, saying why.
pub(super) fn invalid_request(why: &str) -> ErrorObject<'static> {
    ErrorObject::owned(
        INVALID_REQUEST_CODE,
        format!("Invalid request: {why}"),
        None::<()>,
    )
}

/// At most the first 40 characters of `s`, for quoting client input in an error.
pub(super) fn clip(s: &str) -> &str {
    match s.char_indices().nth(40) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonrpsee::core::server::MethodResponse;

    #[test]
    fn ids_that_jsonrpsee_cannot_hold_are_swapped_back_exactly() {
        let stand_in = Id::Str(Cow::Borrowed("agentd-id-alias-1-0"));
        let response = MethodResponse::error(stand_in, invalid_request("x")).into_json();
        let raw = RawValue::from_string("-123456789012345678901234567890".into()).unwrap();
        let swapped = with_raw_id(response, Some(raw));
        assert_eq!(
            swapped.get(),
            "{\"jsonrpc\":\"2.0\",\"id\":-123456789012345678901234567890,\"error\":{\"code\":-32600,\"message\":\"Invalid request: x\"}}"
        );
        let null = MethodResponse::error(Id::Null, invalid_request("y")).into_json();
        let raw = RawValue::from_string("-5".into()).unwrap();
        assert!(
            with_raw_id(null, Some(raw))
                .get()
                .starts_with("{\"jsonrpc\":\"2.0\",\"id\":-5,")
        );
    }

    #[test]
    fn id_classes() {
        let check = |text: &str| {
            let raw = RawValue::from_string(text.into()).unwrap();
            classify_id(&raw).map(|id| id.native.is_some())
        };
        assert_eq!(check("7"), Ok(true));
        assert_eq!(check("\"a\""), Ok(true));
        assert_eq!(check("null"), Ok(true));
        assert_eq!(check("-7"), Ok(false));
        assert_eq!(check("18446744073709551616"), Ok(false));
        assert!(check("1.5").unwrap_err().contains("the number 1.5"));
        assert!(check("1e3").is_err());
        assert!(check("true").unwrap_err().contains("a boolean"));
        assert!(check("{}").unwrap_err().contains("an object"));
        assert!(check("[1]").unwrap_err().contains("an array"));
    }
}
