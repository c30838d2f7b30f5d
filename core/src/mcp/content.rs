//! A tool call's result as the model reads it: text blocks as they are, images attached
//! (where the model takes them) or described, resource links and embedded resources named,
//! structured content as JSON when the server gave no text. The whole is capped at
//! [`MAX_RESULT_CHARS`] before the session's own truncation limits apply.

use agentd_proto::{IMAGE_MEDIA_TYPES, ImageData, MAX_IMAGE_BYTES};
use serde_json::Value;

/// Most characters of one result kept (the event holds them; the model sees what the tool's
/// output limits leave).
pub(super) const MAX_RESULT_CHARS: usize = 1 << 20;
/// Most images one result attaches.
const MAX_IMAGES: usize = 8;

/// What a result gives the model.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Converted {
    pub(super) text: String,
    pub(super) images: Vec<ImageData>,
}

/// Converts a result's `content` and `structuredContent` (the wire JSON, so every content
/// type a server may send is read the same way).
pub(super) fn convert(result: &Value, accepts_images: bool) -> Converted {
    let mut out = Converted::default();
    let mut parts: Vec<String> = Vec::new();
    let blocks = result
        .get("content")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for block in blocks {
        let s = |k: &str| block.get(k).and_then(Value::as_str);
        match s("type") {
            Some("text") => parts.push(s("text").unwrap_or_default().to_owned()),
            Some("image") => {
                let media = s("mimeType").unwrap_or_default();
                let data = s("data").unwrap_or_default();
                let size = data.len() / 4 * 3;
                if !accepts_images {
                    parts.push(format!(
                        "[image {media}, not shown: this model takes no images]"
                    ));
                } else if !IMAGE_MEDIA_TYPES.contains(&media) || size > MAX_IMAGE_BYTES {
                    parts.push(format!("[image {media} of {size} bytes, not shown: only PNG, JPEG, GIF or WebP up to {MAX_IMAGE_BYTES} bytes]"));
                } else if out.images.len() >= MAX_IMAGES {
                    parts.push(format!(
                        "[image not shown: at most {MAX_IMAGES} per result]"
                    ));
                } else {
                    out.images.push(ImageData {
                        media_type: media.to_owned(),
                        data: data.to_owned(),
                    });
                    parts.push(format!("[image {media} attached]"));
                }
            }
            Some("audio") => parts.push(format!(
                "[audio {}, not shown]",
                s("mimeType").unwrap_or_default()
            )),
            Some("resource_link") => parts.push(format!(
                "[resource {}{}{}]",
                s("uri").unwrap_or_default(),
                s("name").map(|n| format!(" ({n})")).unwrap_or_default(),
                s("description")
                    .map(|d| format!(": {d}"))
                    .unwrap_or_default(),
            )),
            Some("resource") => {
                let r = block.get("resource").unwrap_or(&Value::Null);
                let uri = r.get("uri").and_then(Value::as_str).unwrap_or_default();
                match r.get("text").and_then(Value::as_str) {
                    Some(text) => parts.push(format!("[resource {uri}]\n{text}")),
                    None => parts.push(format!(
                        "[resource {uri}: binary {}, not shown]",
                        r.get("mimeType").and_then(Value::as_str).unwrap_or("data")
                    )),
                }
            }
            other => parts.push(format!(
                "[content of type {:?} not shown]",
                other.unwrap_or("none").chars().take(40).collect::<String>()
            )),
        }
    }
    if let Some(structured) = result.get("structuredContent")
        && !structured.is_null()
        && parts.iter().all(|p| p.trim().is_empty())
    {
        parts.push(structured.to_string());
    }
    out.text = cap(parts.join("\n"));
    out
}

/// `text` cut at [`MAX_RESULT_CHARS`], with a note saying how much was dropped.
pub(super) fn cap(text: String) -> String {
    match text.char_indices().nth(MAX_RESULT_CHARS) {
        Some((cut, _)) => format!(
            "{}\n[... {} more bytes of the result dropped]",
            &text[..cut],
            text.len() - cut
        ),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_content_type_is_read() {
        let png = "iVBORw0KGgo=";
        let result = json!({"content": [
            {"type": "text", "text": "hello"},
            {"type": "image", "mimeType": "image/png", "data": png},
            {"type": "image", "mimeType": "image/bmp", "data": "AAAA"},
            {"type": "resource_link", "uri": "file:///a", "name": "a"},
            {"type": "resource", "resource": {"uri": "mem://x", "text": "inside"}},
            {"type": "resource", "resource": {"uri": "mem://y", "blob": "AA==", "mimeType": "application/zip"}},
            {"type": "hologram"}
        ]});
        let c = convert(&result, true);
        assert_eq!(c.images.len(), 1);
        assert_eq!(
            c.text,
            "hello\n[image image/png attached]\n[image image/bmp of 3 bytes, not shown: only PNG, JPEG, GIF or WebP up to 5242880 bytes]\n\
             [resource file:///a (a)]\n[resource mem://x]\ninside\n[resource mem://y: binary application/zip, not shown]\n\
             [content of type \"hologram\" not shown]"
        );
        let c = convert(&result, false);
        assert!(c.images.is_empty());
        assert!(c.text.contains("not shown: this model takes no images"));
    }

    #[test]
    fn structured_content_stands_in_for_missing_text_and_results_are_capped() {
        let c = convert(&json!({"content": [], "structuredContent": {"n": 1}}), true);
        assert_eq!(c.text, "{\"n\":1}");
        let big = "x".repeat(MAX_RESULT_CHARS + 10);
        let c = convert(&json!({"content": [{"type": "text", "text": big}]}), true);
        assert!(
            c.text
                .ends_with("[... 10 more bytes of the result dropped]")
        );
    }
}
