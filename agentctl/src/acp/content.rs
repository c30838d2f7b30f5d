//! A prompt's content blocks as the text input agentd takes: text as it is, a resource link as
//! its path (the model reads the file with its tools), an embedded resource as its path and
//! content. What agentd cannot take as input (images, audio, binary resources) is refused
//! with a message naming it, never dropped.

use agent_client_protocol::Error;
use agent_client_protocol::v1::schema as acp;
use std::fmt::Write;

/// The most text one prompt may carry (the daemon's own input bound is larger; this keeps a
/// runaway embedded file from being copied through the bridge several times).
const MAX_PROMPT_BYTES: usize = 8 << 20;

/// A `file://` URI's path, or the URI itself.
fn path_of(uri: &str) -> &str {
    uri.strip_prefix("file://").unwrap_or(uri)
}

/// The input text for `blocks`.
pub(super) fn input_text(blocks: &[acp::ContentBlock]) -> Result<String, Error> {
    let mut text = String::new();
    for block in blocks {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        match block {
            acp::ContentBlock::Text(t) => text.push_str(&t.text),
            acp::ContentBlock::ResourceLink(link) => {
                let _ = write!(text, "[file: {}]", path_of(&link.uri));
            }
            acp::ContentBlock::Resource(embedded) => match &embedded.resource {
                acp::EmbeddedResourceResource::TextResourceContents(r) => {
                    let _ = write!(
                        text,
                        "<file path=\"{}\">\n{}\n</file>",
                        path_of(&r.uri),
                        r.text
                    );
                }
                acp::EmbeddedResourceResource::BlobResourceContents(r) => {
                    return Err(unsupported(&format!("binary resource {}", r.uri)));
                }
                _ => return Err(unsupported("this kind of embedded resource")),
            },
            acp::ContentBlock::Image(_) => return Err(unsupported("images")),
            acp::ContentBlock::Audio(_) => return Err(unsupported("audio")),
            _ => return Err(unsupported("this kind of content block")),
        }
        if text.len() > MAX_PROMPT_BYTES {
            return Err(Error::invalid_params().data(format!(
                "the prompt is larger than {} MiB",
                MAX_PROMPT_BYTES >> 20
            )));
        }
    }
    if text.trim().is_empty() {
        return Err(Error::invalid_params().data("the prompt has no text"));
    }
    Ok(text)
}

fn unsupported(what: &str) -> Error {
    Error::invalid_params().data(format!(
        "agentd takes text input only; {what} cannot be sent (the initialize response does not \
         advertise them)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_links_and_embedded_files_become_one_input() {
        let blocks = vec![
            acp::ContentBlock::Text(acp::TextContent::new("look at")),
            acp::ContentBlock::ResourceLink(acp::ResourceLink::new("a.rs", "file:///w/a.rs")),
            acp::ContentBlock::Resource(acp::EmbeddedResource::new(
                acp::EmbeddedResourceResource::TextResourceContents(
                    acp::TextResourceContents::new("fn f() {}", "file:///w/b.rs"),
                ),
            )),
        ];
        assert_eq!(
            input_text(&blocks).ok(),
            Some(
                "look at\n[file: /w/a.rs]\n<file path=\"/w/b.rs\">\nfn f() {}\n</file>".to_owned()
            )
        );
    }

    #[test]
    fn images_and_empty_prompts_are_refused() {
        let image = acp::ContentBlock::Image(acp::ImageContent::new("AAAA", "image/png"));
        let err = input_text(&[image]).err().map(|e| e.data);
        assert!(
            format!("{err:?}").contains("images cannot be sent"),
            "{err:?}"
        );
        assert!(input_text(&[]).is_err());
    }
}
