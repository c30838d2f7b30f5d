//! A `text/event-stream` decoder whose cost is linear in its input.
//!
//! It follows the WHATWG event-stream rules agentd needs (see `shared/research/wire-formats.md`
//! section 0): lines end with LF, CRLF or CR (a CRLF split across two chunks is one line end);
//! a blank line dispatches the event; `data:` lines are joined with `\n`; one space after the
//! colon is removed; `:` lines are comments; `event:` names the event (`message` when absent);
//! `id:`, `retry:` and unknown fields are ignored, since agentd never reconnects a stream; a
//! leading byte-order mark is dropped. One deliberate difference: at the end of the body a
//! pending event is delivered even without its blank line, because recorded provider streams
//! end so.
//!
//! **Why hand-written:** `eventsource-stream` re-parses the whole incomplete line on every
//! chunk, so one 8 MiB line arriving in 8 KiB chunks costs seconds of CPU (its issue #11).
//! Here every byte is searched for a line end once ([`Decoder::scanned`]), consumed bytes are
//! dropped once per chunk, and a line is converted to UTF-8 once, when it is complete.
//!
//! A line longer than the configured limit is an error as soon as it is known to be too long,
//! so a hostile server cannot make the daemon buffer without bound.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Event {
    /// The `event:` field; `message` when the event had none.
    pub(crate) event: String,
    /// The `data:` lines, joined with `\n`.
    pub(crate) data: String,
}

/// Why a body is not a valid event stream.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum DecodeError {
    /// A line is longer than the limit.
    #[error(
        "a line of the response stream is longer than {limit} bytes \
         (the limit is max_line_bytes in the provider's config)"
    )]
    LineTooLong {
        /// The limit, in bytes.
        limit: usize,
    },
    /// A field line is not UTF-8.
    #[error("line {line} of the response stream is not valid UTF-8")]
    NotUtf8 {
        /// Its 1-based number.
        line: u64,
    },
}

/// The byte-order mark a stream may start with.
const BOM: &[u8] = "\u{feff}".as_bytes();

/// Decodes a byte stream fed to it in chunks of any size.
#[derive(Debug)]
pub(super) struct Decoder {
    /// The bytes of the incomplete last line (consumed lines are dropped after each chunk).
    buf: Vec<u8>,
    /// How much of `buf` is known to hold no line end: it is never searched again.
    scanned: usize,
    /// The last line ended with CR at the end of a chunk: an LF starting the next one belongs
    /// to it.
    after_cr: bool,
    /// Complete lines seen, for error messages and the byte-order mark.
    lines: u64,
    /// The event type field of the event being built.
    event: String,
    /// The data lines of the event being built, each followed by `\n`.
    data: String,
    /// The longest line accepted, in bytes, without its terminator.
    max_line: usize,
}

impl Decoder {
    /// A decoder that refuses lines longer than `max_line` bytes.
    pub(super) fn new(max_line: usize) -> Self {
        Self {
            buf: Vec::new(),
            scanned: 0,
            after_cr: false,
            lines: 0,
            event: String::new(),
            data: String::new(),
            max_line,
        }
    }

    /// Decodes `chunk`, appending the events it completes to `out`. After an error the
    /// decoder must not be used again.
    pub(super) fn feed(&mut self, chunk: &[u8], out: &mut Vec<Event>) -> Result<(), DecodeError> {
        let mut chunk = chunk;
        if self.after_cr && !chunk.is_empty() {
            self.after_cr = false;
            if chunk[0] == b'\n' {
                chunk = &chunk[1..];
            }
        }
        self.buf.extend_from_slice(chunk);
        let mut start = 0;
        while let Some(i) = self.buf[self.scanned..]
            .iter()
            .position(|&b| b == b'\n' || b == b'\r')
        {
            let end = self.scanned + i;
            let mut next = end + 1;
            if self.buf[end] == b'\r' {
                match self.buf.get(next) {
                    Some(b'\n') => next += 1,
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
            if end - start > self.max_line {
                return Err(DecodeError::LineTooLong {
                    limit: self.max_line,
                });
            }
            let line = std::mem::take(&mut self.buf);
            let result = self.line(&line[start..end], out);
            self.buf = line;
            result?;
            start = next;
            self.scanned = next;
        }
        self.buf.drain(..start);
        self.scanned = self.buf.len();
        if self.buf.len() > self.max_line {
            return Err(DecodeError::LineTooLong {
                limit: self.max_line,
            });
        }
        Ok(())
    }

    /// Ends the stream: a last line without its terminator, and an event without its blank
    /// line, are still delivered.
    pub(super) fn finish(&mut self, out: &mut Vec<Event>) -> Result<(), DecodeError> {
        if !self.buf.is_empty() {
            let line = std::mem::take(&mut self.buf);
            self.line(&line, out)?;
        }
        self.dispatch(out);
        Ok(())
    }

    /// Interprets one complete line (without its terminator).
    fn line(&mut self, line: &[u8], out: &mut Vec<Event>) -> Result<(), DecodeError> {
        self.lines += 1;
        let line = match line.strip_prefix(BOM) {
            Some(rest) if self.lines == 1 => rest,
            _ => line,
        };
        if line.is_empty() {
            self.dispatch(out);
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(());
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &[][..]),
        };
        let line_no = self.lines;
        let text =
            |value| std::str::from_utf8(value).map_err(|_| DecodeError::NotUtf8 { line: line_no });
        match field {
            b"data" => {
                let value = text(value)?;
                self.data.push_str(value);
                self.data.push('\n');
            }
            b"event" => {
                let value = text(value)?;
                self.event.clear();
                self.event.push_str(value);
            }
            _ => {}
        }
        Ok(())
    }

    /// Delivers the event being built, if it has data (an event without data lines is not
    /// dispatched, as the standard says), and starts the next.
    fn dispatch(&mut self, out: &mut Vec<Event>) {
        if self.data.is_empty() {
            self.event.clear();
            return;
        }
        self.data.pop();
        let event = if self.event.is_empty() {
            "message".to_owned()
        } else {
            std::mem::take(&mut self.event)
        };
        out.push(Event {
            event,
            data: std::mem::take(&mut self.data),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes `body` fed in chunks of every size from 1 to 8 bytes, and whole; checks that
    /// each split gives the same events, and returns them.
    fn check(body: &str) -> Vec<(String, String)> {
        let decode = |size: usize| {
            let mut d = Decoder::new(1 << 20);
            let mut out = Vec::new();
            for chunk in body.as_bytes().chunks(size.max(1)) {
                d.feed(chunk, &mut out).unwrap();
            }
            d.finish(&mut out).unwrap();
            out.into_iter()
                .map(|e| (e.event, e.data))
                .collect::<Vec<_>>()
        };
        let whole = decode(body.len());
        for size in 1..=8 {
            assert_eq!(decode(size), whole, "chunks of {size}: {body:?}");
        }
        whole
    }

    fn events(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(e, d)| (e.to_string(), d.to_string()))
            .collect()
    }

    #[test]
    fn line_ends_lf_crlf_and_cr() {
        let want = events(&[("message", "a"), ("message", "b")]);
        assert_eq!(check("data: a\n\ndata: b\n\n"), want);
        assert_eq!(check("data: a\r\n\r\ndata: b\r\n\r\n"), want);
        assert_eq!(check("data: a\r\rdata: b\r\r"), want);
        assert_eq!(check("data: a\r\n\rdata: b\n\r\n"), want);
    }

    #[test]
    fn event_field_multi_line_data_and_one_space() {
        assert_eq!(
            check(
                "event: message_start\ndata: {\"a\":\ndata:1}\n\nevent:ping\ndata:  two spaces\n\n"
            ),
            events(&[("message_start", "{\"a\":\n1}"), ("ping", " two spaces")])
        );
        // The event type does not leak into the next event.
        assert_eq!(
            check("event: a\ndata: 1\n\ndata: 2\n\n"),
            events(&[("a", "1"), ("message", "2")])
        );
        // An empty data line is an event with empty data; `data` without a colon too.
        assert_eq!(
            check("data:\n\ndata\n\n"),
            events(&[("message", ""), ("message", "")])
        );
    }

    #[test]
    fn comments_unknown_fields_and_empty_events_are_skipped() {
        assert_eq!(
            check(
                ": OPENROUTER PROCESSING\n\nid: 7\nretry: 10\nfoo: bar\n\nevent: x\n\n:c\ndata: [DONE]\n\n"
            ),
            events(&[("message", "[DONE]")])
        );
    }

    #[test]
    fn a_byte_order_mark_is_dropped_and_a_final_event_needs_no_blank_line() {
        assert_eq!(
            check("\u{feff}data: a\n\ndata: b"),
            events(&[("message", "a"), ("message", "b")])
        );
        assert_eq!(check("data: c\r\n"), events(&[("message", "c")]));
        assert_eq!(check(""), events(&[]));
    }

    #[test]
    fn code_points_split_across_chunks_are_joined() {
        assert_eq!(
            check("data: héllo ✓ 😀\n\n"),
            events(&[("message", "héllo ✓ 😀")])
        );
    }

    #[test]
    fn bad_input_gets_a_specific_error() {
        let mut d = Decoder::new(1 << 20);
        assert_eq!(
            d.feed(b"data: ok\n\ndata: \xff\xfe\n\n", &mut Vec::new()),
            Err(DecodeError::NotUtf8 { line: 3 })
        );
        // Too long whole, or too long while still incomplete.
        let mut d = Decoder::new(8);
        assert_eq!(
            d.feed(b"data: 123456\n", &mut Vec::new()),
            Err(DecodeError::LineTooLong { limit: 8 })
        );
        let mut d = Decoder::new(8);
        let mut out = Vec::new();
        d.feed(b"data: 12", &mut out).unwrap();
        assert_eq!(
            d.feed(b"3", &mut out),
            Err(DecodeError::LineTooLong { limit: 8 })
        );
        assert_eq!(
            DecodeError::LineTooLong { limit: 8 }.to_string(),
            "a line of the response stream is longer than 8 bytes (the limit is max_line_bytes in the provider's config)"
        );
        // Exactly at the limit is fine.
        let mut d = Decoder::new(8);
        let mut out = Vec::new();
        d.feed(b"data: 12\n\n", &mut out).unwrap();
        assert_eq!(out[0].data, "12");
    }

    /// Prints the CPU time of decoding one 8 MiB line in 8 KiB chunks (the issue 12 case), for
    /// the record: `cargo test -p agentd --lib llm::sse -- --nocapture`. It asserts only the
    /// result, never a time.
    #[test]
    fn an_8_mib_line_in_8_kib_chunks() {
        let mut body = b"data: ".to_vec();
        body.resize(body.len() + (8 << 20), b'x');
        body.extend_from_slice(b"\n\n");
        let cpu = || {
            let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap_or_default();
            let fields: Vec<&str> = stat
                .rsplit_once(')')
                .map(|(_, r)| r)
                .unwrap_or_default()
                .split_whitespace()
                .collect();
            // utime and stime (fields 14 and 15 of stat(5)), in ticks of 1/100 s.
            let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok());
            ticks(11)
                .zip(ticks(12))
                .map_or(0.0, |(u, s)| (u + s) / 100.0)
        };
        let (cpu0, wall0) = (cpu(), std::time::Instant::now());
        let mut d = Decoder::new(16 << 20);
        let mut out = Vec::new();
        for chunk in body.chunks(8192) {
            d.feed(chunk, &mut out).unwrap();
        }
        d.finish(&mut out).unwrap();
        println!(
            "8 MiB line in 8 KiB chunks: {:.2} s CPU, {:.3} s wall",
            cpu() - cpu0,
            wall0.elapsed().as_secs_f64()
        );
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].data.len(), 8 << 20);
    }
}
