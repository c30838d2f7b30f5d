//! Images in user input: the formats taken, how a format is told from its bytes, and the
//! bounds on what one input may carry. The daemon checks every submitted image against these;
//! clients (`agentctl submit --image`, `agentctl acp`) check files before sending them.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Largest request the daemon reads, in bytes; a larger one is refused unread.
pub const MAX_REQUEST_BYTES: usize = 10 << 20;

/// Most images in one input.
pub const MAX_IMAGES: usize = 10;

/// Largest image, decoded (Anthropic's own limit per image, and what `read_file` sends).
pub const MAX_IMAGE_BYTES: usize = 5 << 20;

/// Most image bytes in one input, decoded. In base64 (4 characters per 3 bytes) they must fit
/// in one request with room for the text and the JSON around them.
pub const MAX_IMAGES_BYTES: usize = 7 << 20;

const _: () = assert!(MAX_IMAGES_BYTES.div_ceil(3) * 4 + (512 << 10) < MAX_REQUEST_BYTES);
const _: () = assert!(MAX_IMAGE_BYTES <= MAX_IMAGES_BYTES);

/// The media types images may have.
pub const IMAGE_MEDIA_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// The media type `bytes` are, from their magic number; `None` when they are none of
/// [`IMAGE_MEDIA_TYPES`].
pub fn image_media_type(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(b"\xff\xd8\xff") {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && bytes.starts_with(b"RIFF") && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// What an event says about an image of an input: its type and size, not its data (events
/// stay small; `session/history` with the input's id returns the images themselves).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ImageInfo {
    /// `image/png`, `image/jpeg`, `image/gif` or `image/webp`.
    pub media_type: String,
    /// Its size, decoded.
    pub bytes: u64,
}

#[cfg(test)]
mod tests {
    use super::image_media_type;

    #[test]
    fn formats_are_told_by_their_magic_numbers() {
        let check = |bytes: &[u8]| image_media_type(bytes);
        assert_eq!(check(b"\x89PNG\r\n\x1a\n...."), Some("image/png"));
        assert_eq!(check(b"\xff\xd8\xff\xe0..JFIF"), Some("image/jpeg"));
        assert_eq!(check(b"GIF89a...."), Some("image/gif"));
        assert_eq!(check(b"GIF87a...."), Some("image/gif"));
        assert_eq!(check(b"RIFF\x10\0\0\0WEBPVP8 "), Some("image/webp"));
        assert_eq!(check(b"RIFF\x10\0\0\0WAVEfmt "), None);
        assert_eq!(check(b"%PDF-1.7"), None);
        assert_eq!(check(b""), None);
    }
}
