//! Framing: where one message on a connection ends and the next begins, as `tokio-util`
//! codecs. The client's first byte that is not whitespace picks the framing for the whole
//! connection ([`DetectFraming`]): `C` means LSP-style `Content-Length` headers, anything else
//! newline-delimited JSON. [`MessageDecoder`] then cuts messages under a size cap, charging
//! their bytes to the daemon-wide input budget as they arrive; an oversized message (or one
//! the budget cannot take) is consumed and dropped as it arrives, never buffered, and reported
//! as a [`Frame`] so that the connection answers it and goes on. Only a broken `Content-Length`
//! header, after which the stream cannot be resynchronised, is an error.
//!
//! [`FrameReader`] holds a read buffer only while bytes wait in it, so an idle connection
//! costs no buffer (8 bytes, `FramedRead`'s minimum, when blank lines followed its last
//! message); [`Framing`] is also the encoder of outgoing messages.

use super::message::clip;
use bytes::{Buf, BufMut, BytesMut};
use futures::StreamExt;
use nix::sys::socket::{MsgFlags, recv};
use std::io;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use tokio::io::Interest;
use tokio::net::UnixStream;
use tokio::net::unix::OwnedReadHalf;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::codec::{Decoder, Encoder, FramedRead};

/// Bytes read from the socket at a time.
const READ_CHUNK: usize = 64 * 1024;
/// Longest `Content-Length` header block; a client that sends more is not speaking LSP framing.
const MAX_HEADER: usize = 8 * 1024;
/// The input budget's unit: one permit per KiB held.
pub(super) const BUDGET_UNIT: usize = 1024;

/// How a connection's messages are delimited, in both directions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Framing {
    /// One message per line (newline-delimited JSON).
    Lines,
    /// A `Content-Length: <bytes>` header block, a blank line, then the message.
    ContentLength,
}

/// What the decoder cut from the stream.
#[derive(Debug)]
pub(super) enum Frame {
    /// A whole message.
    Message(Incoming),
    /// A message over the size cap: dropped unread.
    TooBig,
    /// The daemon holds as much unhandled input as it may: the message was dropped.
    Busy,
}

/// A message read whole, with the share of the daemon-wide input budget its bytes hold until
/// it is dropped (after its handling).
#[derive(Debug)]
pub(super) struct Incoming {
    /// The message, without its framing.
    pub bytes: Vec<u8>,
    _charge: Option<OwnedSemaphorePermit>,
}

/// Why reading a connection stopped short.
#[derive(Debug, thiserror::Error)]
pub(super) enum FramingError {
    /// The framing itself is broken (a bad `Content-Length` header): the connection is
    /// answered with this reason and closed.
    #[error("{0}")]
    Broken(String),
    /// The socket failed.
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// Finds the framing from the first byte that is not whitespace (consuming the whitespace
/// before it, and nothing after).
#[derive(Debug)]
pub(super) struct DetectFraming;

impl Decoder for DetectFraming {
    type Item = Framing;
    type Error = io::Error;

    fn decode(&mut self, src: &mut BytesMut) -> io::Result<Option<Framing>> {
        let skip = src.iter().take_while(|b| b.is_ascii_whitespace()).count();
        src.advance(skip);
        if src.is_empty() {
            *src = BytesMut::new();
        }
        Ok(src.first().map(|b| match b {
            b'C' | b'c' => Framing::ContentLength,
            _ => Framing::Lines,
        }))
    }
}

/// Cuts messages in one framing, each at most `max` bytes, charged to `budget` (when given)
/// while they are read and held.
#[derive(Debug)]
pub(super) struct MessageDecoder {
    max: usize,
    budget: Option<Arc<Semaphore>>,
    state: State,
}

#[derive(Debug)]
enum State {
    /// Newline-delimited: reading a line.
    Line(LineReader),
    /// `Content-Length`: reading the header block, with the length once seen and the header
    /// bytes so far.
    Headers {
        line: LineReader,
        length: Option<usize>,
        header_bytes: usize,
    },
    /// `Content-Length`: the body's bytes accumulate in the buffer until `length` are there.
    Body {
        length: usize,
        charge: Option<OwnedSemaphorePermit>,
    },
    /// `Content-Length`: dropping a refused body's `remaining` bytes as they arrive.
    SkipBody { remaining: usize, refused: Refused },
}

impl State {
    fn headers() -> Self {
        Self::Headers {
            line: LineReader::default(),
            length: None,
            header_bytes: 0,
        }
    }

    /// No part of a message has been read (so an empty buffer need not be kept).
    fn between_messages(&self) -> bool {
        match self {
            Self::Line(line) => line.is_fresh(),
            Self::Headers {
                line, header_bytes, ..
            } => line.is_fresh() && *header_bytes == 0,
            Self::Body { .. } | Self::SkipBody { .. } => false,
        }
    }
}

/// Why a message was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refused {
    TooBig,
    Busy,
}

impl Refused {
    fn frame(self) -> Frame {
        match self {
            Self::TooBig => Frame::TooBig,
            Self::Busy => Frame::Busy,
        }
    }
}

/// Reads one line, which stays in the buffer until its `\n` arrives (`scanned` bytes of it
/// hold none), charged as it grows; a refused line is dropped as it arrives.
#[derive(Debug, Default)]
struct LineReader {
    scanned: usize,
    charge: Option<OwnedSemaphorePermit>,
    refused: Option<Refused>,
}

/// What [`LineReader::next`] found.
enum Line {
    Whole(Vec<u8>, Option<OwnedSemaphorePermit>),
    Refused(Refused),
}

impl LineReader {
    fn is_fresh(&self) -> bool {
        self.scanned == 0 && self.charge.is_none() && self.refused.is_none()
    }

    /// The next line (without its `\n`), once whole; `None` until then.
    fn next(
        &mut self,
        src: &mut BytesMut,
        max: usize,
        budget: Option<&Arc<Semaphore>>,
    ) -> Option<Line> {
        let newline = src[self.scanned..]
            .iter()
            .position(|&b| b == b'\n')
            .map(|i| self.scanned + i);
        let len = newline.unwrap_or(src.len());
        if self.refused.is_none() {
            if len > max {
                self.refused = Some(Refused::TooBig);
            } else if !charge(&mut self.charge, budget, len) {
                self.refused = Some(Refused::Busy);
            }
        }
        if let Some(refused) = self.refused {
            // Never buffered: what has arrived of it goes now.
            let _ = self.charge.take();
            src.advance(newline.map_or(len, |i| i + 1));
            self.scanned = 0;
            return newline.map(|_| {
                self.refused = None;
                Line::Refused(refused)
            });
        }
        let end = newline?;
        let line = src[..end].to_vec();
        src.advance(end + 1);
        self.scanned = 0;
        Some(Line::Whole(line, self.charge.take()))
    }

    /// Notes that the buffer's bytes hold no `\n`, so they need not be searched again.
    fn scanned_all(&mut self, src: &BytesMut) {
        if self.refused.is_none() {
            self.scanned = src.len();
        }
    }
}

/// Charges `budget` for a message of `len` bytes (in KiB units, on top of what `charge`
/// holds); false when it cannot. Without a budget, anything fits.
fn charge(
    charge: &mut Option<OwnedSemaphorePermit>,
    budget: Option<&Arc<Semaphore>>,
    len: usize,
) -> bool {
    let Some(budget) = budget else {
        return true;
    };
    let need = len.div_ceil(BUDGET_UNIT);
    let have = charge.as_ref().map_or(0, OwnedSemaphorePermit::num_permits);
    if need <= have {
        return true;
    }
    let Ok(more) = u32::try_from(need - have) else {
        return false;
    };
    match budget.clone().try_acquire_many_owned(more) {
        Ok(permit) => {
            match charge {
                Some(held) => held.merge(permit),
                None => *charge = Some(permit),
            }
            true
        }
        Err(_) => false,
    }
}

impl MessageDecoder {
    /// A decoder for `framing`, of messages up to `max` bytes, charged to `budget`.
    pub(super) fn new(framing: Framing, max: usize, budget: Option<Arc<Semaphore>>) -> Self {
        let state = match framing {
            Framing::Lines => State::Line(LineReader::default()),
            Framing::ContentLength => State::headers(),
        };
        Self { max, budget, state }
    }

    fn next_frame(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, FramingError> {
        loop {
            match &mut self.state {
                State::Line(line) => match line.next(src, self.max, self.budget.as_ref()) {
                    None => {
                        line.scanned_all(src);
                        return Ok(None);
                    }
                    Some(Line::Refused(refused)) => return Ok(Some(refused.frame())),
                    // Blank lines between messages.
                    Some(Line::Whole(bytes, _)) if bytes.iter().all(u8::is_ascii_whitespace) => {}
                    Some(Line::Whole(bytes, charge)) => {
                        return Ok(Some(Frame::Message(Incoming {
                            bytes,
                            _charge: charge,
                        })));
                    }
                },
                State::Headers {
                    line,
                    length,
                    header_bytes,
                } => {
                    let text = match line.next(src, MAX_HEADER, None) {
                        None => {
                            line.scanned_all(src);
                            return Ok(None);
                        }
                        Some(Line::Refused(_)) => return broken("header line too long"),
                        Some(Line::Whole(text, _)) => text,
                    };
                    *header_bytes += text.len() + 1;
                    if *header_bytes > MAX_HEADER {
                        return broken("header block too long");
                    }
                    let Ok(text) = std::str::from_utf8(&text) else {
                        return broken("header is not UTF-8");
                    };
                    let text = text.trim();
                    if text.is_empty() {
                        if let Some(length) = *length {
                            self.state = if length > self.max {
                                State::SkipBody {
                                    remaining: length,
                                    refused: Refused::TooBig,
                                }
                            } else {
                                State::Body {
                                    length,
                                    charge: None,
                                }
                            };
                        } else if *header_bytes <= 2 {
                            // Blank lines between messages.
                            *header_bytes = 0;
                        } else {
                            return broken("missing Content-Length header");
                        }
                        continue;
                    }
                    let Some((name, value)) = text.split_once(':') else {
                        return broken(&format!(
                            "expected a `Content-Length: <bytes>` header, got {:?}",
                            clip(text)
                        ));
                    };
                    if name.trim().eq_ignore_ascii_case("content-length") {
                        let value = value.trim();
                        match value.parse::<usize>() {
                            Ok(n) => *length = Some(n),
                            Err(_) => {
                                return broken(&format!(
                                    "Content-Length must be a non-negative integer, got {:?}",
                                    clip(value)
                                ));
                            }
                        }
                    }
                }
                State::Body {
                    length,
                    charge: held,
                } => {
                    let length = *length;
                    let arrived = src.len().min(length);
                    if !charge(held, self.budget.as_ref(), arrived) {
                        self.state = State::SkipBody {
                            remaining: length,
                            refused: Refused::Busy,
                        };
                        continue;
                    }
                    if arrived < length {
                        return Ok(None);
                    }
                    let bytes = src[..length].to_vec();
                    src.advance(length);
                    let charge = held.take();
                    self.state = State::headers();
                    return Ok(Some(Frame::Message(Incoming {
                        bytes,
                        _charge: charge,
                    })));
                }
                State::SkipBody { remaining, refused } => {
                    let n = src.len().min(*remaining);
                    src.advance(n);
                    *remaining -= n;
                    if *remaining > 0 {
                        return Ok(None);
                    }
                    let refused = *refused;
                    self.state = State::headers();
                    return Ok(Some(refused.frame()));
                }
            }
        }
    }
}

fn broken(why: &str) -> Result<Option<Frame>, FramingError> {
    Err(FramingError::Broken(why.to_owned()))
}

impl Decoder for MessageDecoder {
    type Item = Frame;
    type Error = FramingError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, FramingError> {
        if src.is_empty() {
            return Ok(None);
        }
        let frame = self.next_frame(src)?;
        if src.is_empty() && self.state.between_messages() {
            // Consumed to the end of a message: free the buffer until bytes come again.
            *src = BytesMut::new();
        } else if frame.is_none() {
            // Part of a message is pending: read more at a time than the one byte `FramedRead`
            // makes room for; after a large message, go back to a small buffer.
            if src.is_empty() && src.capacity() > 2 * READ_CHUNK {
                *src = BytesMut::new();
            }
            src.reserve(READ_CHUNK);
        }
        Ok(frame)
    }

    /// At the end of the stream, an unterminated last line is still a line (a message, or a
    /// header); a message whose body never came is dropped unanswered.
    fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, FramingError> {
        let in_line = match &self.state {
            State::Line(line) | State::Headers { line, .. } => !src.is_empty() || !line.is_fresh(),
            State::Body { .. } | State::SkipBody { .. } => false,
        };
        if in_line {
            src.put_u8(b'\n');
        }
        let frame = self.decode(src)?;
        if frame.is_none() {
            src.clear();
        }
        Ok(frame)
    }
}

/// `Lines` messages are compact JSON followed by `\n`; `ContentLength` ones get their header.
impl Encoder<&str> for Framing {
    type Error = io::Error;

    fn encode(&mut self, json: &str, dst: &mut BytesMut) -> io::Result<()> {
        match self {
            Framing::Lines => {
                // Our serializers emit compact JSON; anything else is compacted so that a
                // newline can never break the framing.
                if json.contains('\n') {
                    let compact = serde_json::from_str::<serde_json::Value>(json)
                        .map(|v| v.to_string())
                        .unwrap_or_default();
                    dst.extend_from_slice(compact.as_bytes());
                } else {
                    dst.extend_from_slice(json.as_bytes());
                }
                dst.put_u8(b'\n');
            }
            Framing::ContentLength => {
                dst.extend_from_slice(format!("Content-Length: {}\r\n\r\n", json.len()).as_bytes());
                dst.extend_from_slice(json.as_bytes());
            }
        }
        Ok(())
    }
}

/// Reads a connection through decoder `D`, with a read buffer that exists only while it holds
/// unread bytes: waiting for input holds none.
pub(super) struct FrameReader<D> {
    framed: FramedRead<OwnedReadHalf, D>,
}

impl FrameReader<DetectFraming> {
    /// A reader that first finds the connection's framing.
    pub(super) fn new(read: OwnedReadHalf) -> Self {
        Self {
            framed: FramedRead::with_capacity(read, DetectFraming, 0),
        }
    }

    /// The framing the client speaks; `None` if it closes first.
    pub(super) async fn framing(&mut self) -> io::Result<Option<Framing>> {
        self.next().await.transpose()
    }

    /// Goes on reading messages with `decoder`, from the first byte that picked the framing.
    pub(super) fn messages(self, decoder: MessageDecoder) -> FrameReader<MessageDecoder> {
        FrameReader {
            framed: self.framed.map_decoder(|_| decoder),
        }
    }
}

impl<D: Decoder> FrameReader<D> {
    /// The next item; `None` at the end of the stream (or after an error).
    pub(super) async fn next(&mut self) -> Option<Result<D::Item, D::Error>> {
        if self.framed.read_buffer().is_empty() {
            // Make room only once there is something to read.
            if let Err(e) = input_waiting(self.framed.get_ref()).await {
                return Some(Err(e.into()));
            }
            self.framed.read_buffer_mut().reserve(READ_CHUNK);
        }
        self.framed.next().await
    }
}

/// Completes once `read` has a byte (or its end) to read, without reading it. Readiness
/// alone proves nothing: a freshly accepted socket reports it with nothing to read.
async fn input_waiting(read: &OwnedReadHalf) -> io::Result<()> {
    let socket: &UnixStream = read.as_ref();
    loop {
        socket.readable().await?;
        let peeked = socket.try_io(Interest::READABLE, || {
            recv(socket.as_raw_fd(), &mut [0; 1], MsgFlags::MSG_PEEK).map_err(io::Error::from)
        });
        match peeked {
            // `try_io` has cleared the readiness.
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            peeked => return peeked.map(drop),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn lines(max: usize) -> MessageDecoder {
        MessageDecoder::new(Framing::Lines, max, None)
    }

    fn content_length(max: usize) -> MessageDecoder {
        MessageDecoder::new(Framing::ContentLength, max, None)
    }

    /// Feeds `parts` one after the other (as separate reads), then the end of the stream;
    /// returns what came out, messages as text.
    fn feed(decoder: &mut MessageDecoder, parts: &[&[u8]]) -> Vec<Result<String, String>> {
        let mut src = BytesMut::new();
        let mut out = Vec::new();
        for part in parts {
            src.extend_from_slice(part);
            loop {
                match decoder.decode(&mut src) {
                    Ok(Some(frame)) => out.push(Ok(frame)),
                    Ok(None) => break,
                    // Like `FramedRead`: nothing is decoded after an error.
                    Err(e) => return done(out, Some(e)),
                }
            }
        }
        loop {
            match decoder.decode_eof(&mut src) {
                Ok(Some(frame)) => out.push(Ok(frame)),
                Ok(None) => return done(out, None),
                Err(e) => return done(out, Some(e)),
            }
        }
    }

    fn done(
        frames: Vec<Result<Frame, FramingError>>,
        error: Option<FramingError>,
    ) -> Vec<Result<String, String>> {
        frames
            .into_iter()
            .chain(error.map(Err))
            .map(|frame| match frame {
                Ok(Frame::Message(m)) => Ok(String::from_utf8_lossy(&m.bytes).into_owned()),
                Ok(Frame::TooBig) => Err("too big".to_owned()),
                Ok(Frame::Busy) => Err("busy".to_owned()),
                Err(e) => Err(format!("broken: {e}")),
            })
            .collect()
    }

    fn ok(messages: &[&str]) -> Vec<Result<String, String>> {
        messages.iter().map(|m| Ok((*m).to_owned())).collect()
    }

    #[test]
    fn lines_split_across_reads_come_out_whole_and_blank_lines_are_skipped() {
        let out = feed(
            &mut lines(100),
            &[b"{\"a\":", b"1}\n\n  \r\n{\"b\"", b":2}\r\n{\"c\":3}"],
        );
        // The unterminated last line still counts at the end of the stream.
        assert_eq!(out, ok(&["{\"a\":1}", "{\"b\":2}\r", "{\"c\":3}"]));
    }

    #[test]
    fn a_line_exactly_at_the_cap_passes_and_one_byte_more_is_skipped_unbuffered() {
        let at_cap = "x".repeat(10);
        let over = "y".repeat(11);
        let out = feed(
            &mut lines(10),
            &[format!("{at_cap}\n{over}").as_bytes(), b"yyyy\n{}\n"],
        );
        assert_eq!(
            out,
            vec![Ok(at_cap), Err("too big".into()), Ok("{}".into())]
        );
        // While a refused line streams in, the buffer does not grow with it.
        let mut decoder = lines(10);
        let mut src = BytesMut::from(&b"zzzzzzzzzzzz"[..]);
        assert!(matches!(decoder.decode(&mut src), Ok(None)));
        assert!(src.is_empty());
        src.extend_from_slice(&[b'z'; 1000]);
        assert!(matches!(decoder.decode(&mut src), Ok(None)));
        assert!(src.is_empty());
        src.extend_from_slice(b"z\n");
        assert!(matches!(decoder.decode(&mut src), Ok(Some(Frame::TooBig))));
    }

    #[test]
    fn an_oversized_last_line_is_reported_at_the_end_of_the_stream() {
        assert_eq!(
            feed(&mut lines(3), &[b"{}\n", b"abcd"]),
            vec![Ok("{}".into()), Err("too big".into())]
        );
    }

    #[test]
    fn a_content_length_frame_split_anywhere_comes_out_whole() {
        let stream = b"Content-Length: 7\r\nContent-Type: application/json\r\n\r\n{\"a\":1}\r\n\r\ncontent-length:2\n\n{}";
        for split in 1..stream.len() {
            let (a, b) = stream.split_at(split);
            assert_eq!(
                feed(&mut content_length(100), &[a, b]),
                ok(&["{\"a\":1}", "{}"]),
                "split at {split}"
            );
        }
        // One byte per read.
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(
            feed(&mut content_length(100), &bytes),
            ok(&["{\"a\":1}", "{}"])
        );
    }

    #[test]
    fn content_length_bodies_at_the_cap_pass_and_larger_ones_are_skipped() {
        let out = feed(
            &mut content_length(5),
            &[
                b"Content-Length: 5\r\n\r\n[1,2]Content-Length: 6\r\n\r\n",
                b"12",
                b"3456",
                b"Content-Length: 2\r\n\r\n{}",
            ],
        );
        assert_eq!(
            out,
            vec![Ok("[1,2]".into()), Err("too big".into()), Ok("{}".into())]
        );
        // A body that never comes is no message.
        assert_eq!(
            feed(&mut content_length(100), &[b"Content-Length: 10\r\n\r\n{}"]),
            vec![]
        );
    }

    #[test]
    fn broken_headers_say_what_is_wrong() {
        let cases: [(&[u8], &str); 6] = [
            (
                b"Content-Length: -5\r\n\r\n",
                "non-negative integer, got \"-5\"",
            ),
            (
                b"Content-Length: ten\r\n\r\n",
                "non-negative integer, got \"ten\"",
            ),
            (
                b"Content-Lenth 10\r\n\r\n{}",
                "expected a `Content-Length: <bytes>` header",
            ),
            (
                b"Content-Type: x\r\n\r\n{}",
                "missing Content-Length header",
            ),
            (b"Content-Length: \xff\r\n\r\n", "header is not UTF-8"),
            // Unterminated at the end of the stream, still a header line.
            (
                b"garbage",
                "expected a `Content-Length: <bytes>` header, got \"garbage\"",
            ),
        ];
        for (bytes, why) in cases {
            let out = feed(&mut content_length(100), &[bytes]);
            assert!(
                matches!(&out[..], [Err(e)] if e.starts_with("broken: ") && e.contains(why)),
                "{:?}: {out:?}",
                String::from_utf8_lossy(bytes)
            );
        }
        let long_line = format!("X-Pad: {}\r\n", "p".repeat(MAX_HEADER));
        let out = feed(&mut content_length(100), &[long_line.as_bytes()]);
        assert_eq!(out, vec![Err("broken: header line too long".into())]);
        let long_block = "X-Pad: pppppppp\r\n".repeat(MAX_HEADER / 16);
        let out = feed(&mut content_length(100), &[long_block.as_bytes()]);
        assert_eq!(out, vec![Err("broken: header block too long".into())]);
    }

    #[test]
    fn garbage_in_lines_is_a_message_for_the_dispatcher_to_diagnose() {
        let out = feed(&mut lines(100), &[b"\xff\xfe not json\n", b"[1,\n"]);
        assert_eq!(out, ok(&["\u{fffd}\u{fffd} not json", "[1,"]));
    }

    #[test]
    fn the_budget_is_charged_while_a_message_is_held_and_a_message_it_cannot_take_is_busy() {
        let budget = Arc::new(Semaphore::new(4));
        let mut decoder = MessageDecoder::new(Framing::Lines, 1 << 20, Some(budget.clone()));
        let mut src = BytesMut::new();
        src.extend_from_slice(&[b' '; 2 * BUDGET_UNIT]);
        src.extend_from_slice(b"1\n");
        let Ok(Some(Frame::Message(held))) = decoder.decode(&mut src) else {
            panic!("a message within the budget");
        };
        assert_eq!(budget.available_permits(), 1, "2 KiB + 1 byte hold 3 units");
        // The next line is charged as it arrives, and refused once it needs more than is left.
        src.extend_from_slice(&[b'2'; BUDGET_UNIT]);
        assert!(matches!(decoder.decode(&mut src), Ok(None)));
        assert_eq!(budget.available_permits(), 0);
        src.extend_from_slice(b"2");
        assert!(matches!(decoder.decode(&mut src), Ok(None)));
        assert_eq!(
            budget.available_permits(),
            1,
            "a refused line's charge is dropped at once"
        );
        src.extend_from_slice(b"\n");
        assert!(matches!(decoder.decode(&mut src), Ok(Some(Frame::Busy))));
        drop(held);
        assert_eq!(budget.available_permits(), 4, "given back with the message");

        let mut decoder =
            MessageDecoder::new(Framing::ContentLength, 1 << 20, Some(budget.clone()));
        let mut src =
            BytesMut::from(format!("Content-Length: {}\r\n\r\n", 5 * BUDGET_UNIT).as_bytes());
        src.extend_from_slice(&[b'x'; 4 * BUDGET_UNIT]);
        assert!(matches!(decoder.decode(&mut src), Ok(None)));
        assert_eq!(budget.available_permits(), 0, "charged as the body arrives");
        src.extend_from_slice(&[b'x'; BUDGET_UNIT]);
        assert!(matches!(decoder.decode(&mut src), Ok(Some(Frame::Busy))));
        assert_eq!(budget.available_permits(), 4);
    }

    #[test]
    fn detection_skips_leading_whitespace_and_keeps_the_first_byte() {
        let mut src = BytesMut::from(&b" \r\n\t"[..]);
        assert_eq!(DetectFraming.decode(&mut src).unwrap(), None);
        assert_eq!(src.capacity(), 0, "whitespace alone holds no buffer");
        src.extend_from_slice(b"Content-Length: 2");
        assert_eq!(
            DetectFraming.decode(&mut src).unwrap(),
            Some(Framing::ContentLength)
        );
        assert_eq!(&src[..], b"Content-Length: 2");
        let mut src = BytesMut::from(&b"\n[{}]"[..]);
        assert_eq!(
            DetectFraming.decode(&mut src).unwrap(),
            Some(Framing::Lines)
        );
        assert_eq!(&src[..], b"[{}]");
    }

    #[test]
    fn encoding_frames_each_message() {
        let mut out = BytesMut::new();
        Framing::Lines.encode("{\"a\":\n1}", &mut out).unwrap();
        Framing::Lines.encode("{}", &mut out).unwrap();
        Framing::ContentLength.encode("{}", &mut out).unwrap();
        assert_eq!(&out[..], b"{\"a\":1}\n{}\nContent-Length: 2\r\n\r\n{}");
    }

    #[tokio::test]
    async fn a_connection_that_sends_nothing_holds_no_buffer() {
        let path = std::env::temp_dir().join(format!("agentd-framing-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let listener = tokio::net::UnixListener::bind(&path).unwrap();
        let _client = UnixStream::connect(&path).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let _ = std::fs::remove_file(&path);
        let (read, _write) = server.into_split();
        let mut reader = FrameReader::new(read);
        // An accepted socket reports readiness with nothing to read.
        let waited = tokio::time::timeout(Duration::from_millis(50), reader.framing()).await;
        assert!(waited.is_err(), "nothing was sent");
        assert_eq!(reader.framed.read_buffer().capacity(), 0);
    }

    #[tokio::test]
    async fn a_reader_holds_no_buffer_between_messages() {
        use tokio::io::AsyncWriteExt;
        let (client, server) = tokio::net::UnixStream::pair().unwrap();
        let (read, _write) = server.into_split();
        let (_client_read, mut client) = client.into_split();
        let mut reader = FrameReader::new(read);
        client.write_all(b"  {\"a\":1}\n{\"b\"").await.unwrap();
        assert_eq!(reader.framing().await.unwrap(), Some(Framing::Lines));
        let mut reader = reader.messages(lines(100));
        let Some(Ok(Frame::Message(m))) = reader.next().await else {
            panic!("a message");
        };
        assert_eq!(m.bytes, b"{\"a\":1}");
        client.write_all(b":2}\n").await.unwrap();
        let Some(Ok(Frame::Message(m))) = reader.next().await else {
            panic!("a message");
        };
        assert_eq!(m.bytes, b"{\"b\":2}");
        assert_eq!(reader.framed.read_buffer().capacity(), 0);
        drop(client);
        assert!(reader.next().await.is_none());
    }
}
