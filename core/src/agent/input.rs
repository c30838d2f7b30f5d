//! One input for the loop (a client's text and images) and the checks every image a client
//! sends must pass before it is taken: how many, the format, that the base64 decodes, that
//! the bytes are the format named, and the sizes (see `agentd_proto::images`).

use agentd_proto::{
    IMAGE_MEDIA_TYPES, ImageData, ImageInfo, InputId, MAX_IMAGE_BYTES, MAX_IMAGES,
    MAX_IMAGES_BYTES, QueuedInput, image_media_type,
};
use base64::Engine;

/// An input waiting or running: what the queues hold and the loop takes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Input {
    /// Its id.
    pub(crate) input_id: InputId,
    /// The text.
    pub(crate) text: String,
    /// The images sent with it, checked.
    pub(crate) images: Vec<ImageData>,
}

impl Input {
    /// How queues show it: its images as type and size.
    pub(crate) fn queued(&self) -> QueuedInput {
        QueuedInput {
            input_id: self.input_id.clone(),
            text: self.text.clone(),
            images: infos(&self.images),
        }
    }
}

/// Type and size of each image (the size from the base64's length: the images were checked).
pub(crate) fn infos(images: &[ImageData]) -> Vec<ImageInfo> {
    images
        .iter()
        .map(|i| {
            let data = i.data.trim_end_matches('=');
            ImageInfo {
                media_type: i.media_type.clone(),
                bytes: (data.len() * 3 / 4) as u64,
            }
        })
        .collect()
}

/// Checks `images` as a client sent them; the error names the image (`images[N]`, counted
/// from 0) and what is wrong with it.
pub(crate) fn check_images(images: &[ImageData]) -> Result<(), String> {
    if images.len() > MAX_IMAGES {
        return Err(format!(
            "{} images were sent; an input takes at most {MAX_IMAGES}",
            images.len()
        ));
    }
    let mut total = 0usize;
    for (n, image) in images.iter().enumerate() {
        if !IMAGE_MEDIA_TYPES.contains(&image.media_type.as_str()) {
            return Err(format!(
                "images[{n}]: media type {:?} is not taken; use one of {}",
                image.media_type,
                IMAGE_MEDIA_TYPES.join(", ")
            ));
        }
        // Checked before decoding, so an oversized image costs no decoding.
        if image.data.len() / 4 * 3 > MAX_IMAGE_BYTES + 2 {
            return Err(too_big(n, image.data.len() / 4 * 3));
        }
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(image.data.as_bytes())
            .map_err(|e| format!("images[{n}]: data is not valid base64 ({e})"))?;
        if bytes.is_empty() {
            return Err(format!("images[{n}]: data is empty"));
        }
        if bytes.len() > MAX_IMAGE_BYTES {
            return Err(too_big(n, bytes.len()));
        }
        match image_media_type(&bytes) {
            Some(found) if found == image.media_type => {}
            Some(found) => {
                return Err(format!(
                    "images[{n}]: media type is {} but the bytes are {found}",
                    image.media_type
                ));
            }
            None => {
                return Err(format!(
                    "images[{n}]: media type is {} but the bytes are not a png, jpeg, gif or \
                     webp image",
                    image.media_type
                ));
            }
        }
        total += bytes.len();
        if total > MAX_IMAGES_BYTES {
            return Err(format!(
                "images[{n}]: the images so far come to {total} bytes; an input's images may \
                 come to at most {MAX_IMAGES_BYTES} bytes ({} MiB) in all",
                MAX_IMAGES_BYTES >> 20
            ));
        }
    }
    Ok(())
}

fn too_big(n: usize, bytes: usize) -> String {
    format!(
        "images[{n}]: {bytes} bytes is too large; an image may have at most {MAX_IMAGE_BYTES} \
         bytes ({} MiB)",
        MAX_IMAGE_BYTES >> 20
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(media_type: &str, bytes: &[u8]) -> ImageData {
        ImageData {
            media_type: media_type.into(),
            data: base64::engine::general_purpose::STANDARD.encode(bytes),
        }
    }

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

    #[test]
    fn each_bad_image_gets_its_own_error() {
        let check = |images: &[ImageData]| check_images(images).err().unwrap_or_default();
        assert_eq!(check(&[image("image/png", PNG)]), "");
        assert_eq!(
            check(&vec![image("image/png", PNG); 11]),
            "11 images were sent; an input takes at most 10"
        );
        assert!(
            check(&[image("image/png", PNG), image("image/bmp", b"BM")])
                .starts_with("images[1]: media type \"image/bmp\" is not taken")
        );
        let bad = ImageData {
            media_type: "image/png".into(),
            data: "not base64!".into(),
        };
        assert!(check(&[bad]).starts_with("images[0]: data is not valid base64"));
        assert_eq!(
            check(&[image("image/jpeg", PNG)]),
            "images[0]: media type is image/jpeg but the bytes are image/png"
        );
        assert!(check(&[image("image/png", b"plain text")]).contains("are not a png"));
        assert_eq!(
            check(&[image("image/png", b"")]),
            "images[0]: data is empty"
        );
        let mut big = PNG.to_vec();
        big.resize(MAX_IMAGE_BYTES + 1, 0);
        assert!(check(&[image("image/png", &big)]).starts_with("images[0]: 5242881 bytes"));
        big.truncate(4 << 20);
        let two = [image("image/png", &big), image("image/png", &big)];
        assert!(check(&two).starts_with("images[1]: the images so far come to 8388608 bytes"));
    }

    #[test]
    fn sizes_come_from_the_base64() {
        for len in [1, 2, 3, 4, 100] {
            let data = vec![7u8; len];
            assert_eq!(infos(&[image("image/png", &data)])[0].bytes, len as u64);
        }
    }
}
