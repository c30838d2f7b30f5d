//! `--image PATH` (for `submit`, `steer` and `follow-up`): image files read, typed from their
//! bytes and checked against the daemon's bounds before the daemon is contacted, so a wrong
//! path or a file that is no image fails at once and nothing is sent.

use crate::error::{Failure, Result};
use agentd_proto::{
    IMAGE_MEDIA_TYPES, ImageData, MAX_IMAGE_BYTES, MAX_IMAGES, MAX_IMAGES_BYTES, image_media_type,
};
use base64::Engine;
use std::io::Read;
use std::path::{Path, PathBuf};

#[derive(clap::Args, Default)]
pub(crate) struct ImageArgs {
    /// Send an image with the text (png, jpeg, gif or webp; repeatable, at most 10, each at
    /// most 5 MiB and 7 MiB in all). The session's provider must take images.
    #[arg(long = "image", value_name = "PATH")]
    paths: Vec<PathBuf>,
    /// The images read from `paths`.
    #[arg(skip)]
    loaded: Vec<ImageData>,
}

impl ImageArgs {
    /// Reads and checks every file.
    pub(crate) fn read(&mut self) -> Result<()> {
        if self.paths.len() > MAX_IMAGES {
            return Err(Failure::usage(format!(
                "{} --image files given; at most {MAX_IMAGES} go with one input",
                self.paths.len()
            )));
        }
        let mut total = 0;
        for path in &self.paths {
            let (image, bytes) = read(path)?;
            total += bytes;
            if total > MAX_IMAGES_BYTES {
                return Err(Failure::usage(format!(
                    "--image {}: the images come to more than {} MiB in all, the most one \
                     input takes",
                    path.display(),
                    MAX_IMAGES_BYTES >> 20
                )));
            }
            self.loaded.push(image);
        }
        Ok(())
    }

    /// The images read.
    pub(crate) fn take(&mut self) -> Vec<ImageData> {
        std::mem::take(&mut self.loaded)
    }
}

/// One image file and its size; its media type comes from its bytes, not its name.
fn read(path: &Path) -> Result<(ImageData, usize)> {
    let shown = path.display();
    let file = std::fs::File::open(path)
        .map_err(|e| Failure::usage(format!("--image {shown}: cannot read it: {e}")))?;
    let mut bytes = Vec::new();
    // One byte more than allowed tells a file that is too large without reading it all.
    file.take(MAX_IMAGE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Failure::usage(format!("--image {shown}: cannot read it: {e}")))?;
    if bytes.len() > MAX_IMAGE_BYTES {
        return Err(Failure::usage(format!(
            "--image {shown}: the file is larger than {} MiB, the most one image may have",
            MAX_IMAGE_BYTES >> 20
        )));
    }
    let Some(media_type) = image_media_type(&bytes) else {
        return Err(Failure::usage(format!(
            "--image {shown}: not an image agentd takes ({})",
            IMAGE_MEDIA_TYPES.join(", ")
        )));
    };
    let image = ImageData {
        media_type: media_type.to_owned(),
        data: base64::engine::general_purpose::STANDARD.encode(&bytes),
    };
    Ok((image, bytes.len()))
}
