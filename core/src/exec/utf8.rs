//! Decodes a byte stream that may split UTF-8 code points across reads.

/// Buffers the incomplete tail of a chunk until the next one completes it.
#[derive(Default)]
pub(crate) struct Utf8Decoder {
    pending: Vec<u8>,
}

impl Utf8Decoder {
    /// Decodes as much of `pending + chunk` as forms whole code points; invalid bytes become
    /// U+FFFD.
    pub(crate) fn push(&mut self, chunk: &[u8]) -> String {
        self.pending.extend_from_slice(chunk);
        let cut = match std::str::from_utf8(&self.pending) {
            Ok(_) => self.pending.len(),
            // An incomplete sequence at the very end: keep it for the next chunk.
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => self.pending.len(),
        };
        let rest = self.pending.split_off(cut);
        let out = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending = rest;
        out
    }

    /// Flushes whatever is left (an incomplete sequence becomes U+FFFD).
    pub(crate) fn finish(&mut self) -> String {
        let out = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_code_point_is_rejoined() {
        let bytes = "héllo €".as_bytes();
        let mut d = Utf8Decoder::default();
        let mut out = String::new();
        for b in bytes {
            out.push_str(&d.push(std::slice::from_ref(b)));
        }
        out.push_str(&d.finish());
        assert_eq!(out, "héllo €");
    }

    #[test]
    fn invalid_bytes_become_replacement() {
        let mut d = Utf8Decoder::default();
        assert_eq!(d.push(b"a\xffb"), "a\u{fffd}b");
    }
}
