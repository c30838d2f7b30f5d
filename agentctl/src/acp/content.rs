//! A prompt's content blocks as the input agentd takes: text as it is, a resource link as its
//! path (the model reads the file with its tools), an embedded resource as its path and
//! content, an image as an image of the input (the daemon checks it: its errors name the
//! image as `images[N]`, counted among the prompt's images). What agentd cannot take as input
//! (audio, binary resources) is refused with a message naming it, never dropped. Also the
//! other way: the images of a replayed user input, fetched from the history, as
//! `user_message_chunk`s.

use crate::client::Connection;
use agent_client_protocol::Error;
use agent_client_protocol::v1::schema as acp;
use agentd_proto::methods::SessionHistory;
use agentd_proto::{
    EventBody, HistoryParams, ImageData, MAX_IMAGES, MAX_IMAGES_BYTES, SessionId, Turn,
};
use std::fmt::Write;

/// The most text one prompt may carry (the daemon's own input bound is larger; this keeps a
/// runaway embedded file from being copied through the bridge several times).
const MAX_PROMPT_BYTES: usize = 8 << 20;

/// A `file://` URI's path, or the URI itself.
fn path_of(uri: &str) -> &str {
    uri.strip_prefix("file://").unwrap_or(uri)
}

/// A prompt as agentd's input: its text and its images.
#[derive(Debug, PartialEq)]
pub(super) struct Input {
    pub(super) text: String,
    pub(super) images: Vec<ImageData>,
}

/// The input for `blocks`.
pub(super) fn input(blocks: &[acp::ContentBlock]) -> Result<Input, Error> {
    let mut text = String::new();
    let mut images = Vec::new();
    for block in blocks {
        if !text.is_empty()
            && !text.ends_with('\n')
            && !matches!(block, acp::ContentBlock::Image(_))
        {
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
            acp::ContentBlock::Image(image) => images.push(ImageData {
                media_type: image.mime_type.clone(),
                data: image.data.clone(),
            }),
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
    // The daemon checks each image; what would not fit in one request is refused here, with
    // the bounds' own words rather than the socket's "request too large".
    let encoded: usize = images.iter().map(|i| i.data.len()).sum();
    if images.len() > MAX_IMAGES || encoded / 4 * 3 > MAX_IMAGES_BYTES + 2 * images.len() {
        return Err(Error::invalid_params().data(format!(
            "the prompt has {} images of about {} bytes in all; agentd takes at most \
             {MAX_IMAGES} images and {} MiB of them per prompt",
            images.len(),
            encoded / 4 * 3,
            MAX_IMAGES_BYTES >> 20
        )));
    }
    if text.trim().is_empty() && images.is_empty() {
        return Err(Error::invalid_params().data("the prompt has no text"));
    }
    Ok(Input { text, images })
}

fn unsupported(what: &str) -> Error {
    Error::invalid_params().data(format!(
        "agentd takes text and images as input; {what} cannot be sent (the initialize response \
         does not advertise them)"
    ))
}

/// For a replayed `user_input` or `steering_injected` that had images: the images, read from
/// the session's history, as user message chunks (after the text the event's own update
/// carried). An input whose entry cannot be read is said so in a text chunk.
pub(super) async fn replayed_images(
    daemon: &Connection,
    session_id: &SessionId,
    body: &EventBody,
) -> Vec<acp::SessionUpdate> {
    let (EventBody::UserInput {
        input_id, images, ..
    }
    | EventBody::SteeringInjected {
        input_id, images, ..
    }) = body
    else {
        return Vec::new();
    };
    if images.is_empty() {
        return Vec::new();
    }
    let params = HistoryParams {
        session_id: session_id.clone(),
        offset: 0,
        limit: None,
        input_id: Some(input_id.clone()),
    };
    let entry = match daemon.call::<SessionHistory>(params).await {
        Ok(mut page) => page.entries.pop(),
        Err(e) => {
            eprintln!("agentctl acp: the images of input {input_id} cannot be read: {e}");
            None
        }
    };
    let data = match entry.map(|e| e.turn) {
        Some(Turn::User { images, .. } | Turn::Steering { images, .. }) => images,
        _ => Vec::new(),
    };
    if data.is_empty() {
        let text = format!("[{} image(s) not available]", images.len());
        return vec![acp::SessionUpdate::UserMessageChunk(
            acp::ContentChunk::new(acp::ContentBlock::Text(acp::TextContent::new(text))),
        )];
    }
    data.into_iter()
        .map(|i| {
            acp::SessionUpdate::UserMessageChunk(acp::ContentChunk::new(acp::ContentBlock::Image(
                acp::ImageContent::new(i.data, i.media_type),
            )))
        })
        .collect()
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
            input(&blocks).ok().map(|i| i.text),
            Some(
                "look at\n[file: /w/a.rs]\n<file path=\"/w/b.rs\">\nfn f() {}\n</file>".to_owned()
            )
        );
    }

    #[test]
    fn images_become_the_inputs_images_and_audio_and_empty_prompts_are_refused() {
        let image = acp::ContentBlock::Image(acp::ImageContent::new("AAAA", "image/png"));
        let text = acp::ContentBlock::Text(acp::TextContent::new("what is it?"));
        assert_eq!(
            input(&[image.clone(), text]).ok(),
            Some(Input {
                text: "what is it?".into(),
                images: vec![ImageData {
                    media_type: "image/png".into(),
                    data: "AAAA".into()
                }],
            })
        );
        assert_eq!(input(&[image]).map(|i| i.images.len()).ok(), Some(1));
        let audio = acp::ContentBlock::Audio(acp::AudioContent::new("AAAA", "audio/wav"));
        let err = input(&[audio]).err().map(|e| e.data);
        assert!(
            format!("{err:?}").contains("audio cannot be sent"),
            "{err:?}"
        );
        assert!(input(&[]).is_err());
        let many = vec![image_block(); MAX_IMAGES + 1];
        let err = input(&many).err().map(|e| e.data);
        assert!(format!("{err:?}").contains("at most 10 images"), "{err:?}");
        let big = acp::ContentBlock::Image(acp::ImageContent::new(
            "A".repeat(MAX_IMAGES_BYTES / 3 * 4 + 8),
            "image/png",
        ));
        assert!(input(&[big]).is_err());
    }

    fn image_block() -> acp::ContentBlock {
        acp::ContentBlock::Image(acp::ImageContent::new("AAAA", "image/png"))
    }
}
