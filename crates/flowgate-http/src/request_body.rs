//! Request bodies: media type, content encoding, size and pace checked while reading (D7,
//! D11, D25). A body is never buffered beyond its limit, a gzip body's limit applies to the
//! decoded bytes, decoded incrementally so a decompression bomb stops at the limit, and a body
//! that arrives too slowly ([`BodyPace`]) ends the read with 408 and closes the connection.
//! Memory grows with the bytes that arrived, never with the length a client declares.

use std::io::Read;
use std::time::{Duration, Instant};

use actix_web::dev::Payload;
use actix_web::error::PayloadError;
use actix_web::http::header;
use actix_web::web::Bytes;
use actix_web::{HttpMessage, HttpRequest};
use futures_util::StreamExt;
use serde_json::Value;

use crate::config::BodyPace;
use crate::problem::ApiError;

/// A body read that the client ended (a read error: the connection broke) or let run past its
/// pace (D25). Left in the request's extensions: the time such a request took is the
/// client's, so it is counted apart and kept out of the latency histograms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BodyAbort {
    /// The body did not arrive within its [`BodyPace`] (408).
    TimedOut,
    /// The body could not be read to its end (the client went away or broke the framing).
    Broken,
}

impl BodyAbort {
    /// The metric label.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            BodyAbort::TimedOut => "timed_out",
            BodyAbort::Broken => "broken",
        }
    }
}

/// The grace before [`BodyPace::min_bytes_per_sec`] applies: a client's first bytes may wait
/// for a round trip or two.
const RATE_GRACE: Duration = Duration::from_secs(1);

/// When the read of a body must have `received` bytes by, for a read that began at `start`:
/// the earlier of the whole-body deadline and the point where the average rate, after the
/// grace, falls below the minimum.
fn pace_deadline(pace: &BodyPace, start: Instant, received: usize) -> Instant {
    let whole = start + pace.timeout;
    if pace.min_bytes_per_sec == 0 {
        return whole;
    }
    let earned = Duration::from_secs_f64(received as f64 / f64::from(pace.min_bytes_per_sec));
    whole.min(start + RATE_GRACE + earned)
}

/// The next item of `payload` if it is there after one yield to the runtime.
async fn yield_then_poll(payload: &mut Payload) -> Option<Option<Result<Bytes, PayloadError>>> {
    actix_web::rt::task::yield_now().await;
    futures_util::future::poll_immediate(payload.next()).await
}

/// Waits for the next chunk of `payload` (or its end) until the body's pace deadline; past it,
/// a 408 (and the request is marked [`BodyAbort::TimedOut`]). `start` is when the read began
/// waiting: set at the first chunk that was not there yet, so a body that arrived with its
/// head costs neither a timer nor a clock read.
async fn wait_for_chunk(
    req: &HttpRequest,
    payload: &mut Payload,
    pace: &BodyPace,
    start: &mut Option<Instant>,
    received: usize,
) -> Result<Option<Result<Bytes, PayloadError>>, ApiError> {
    let now = Instant::now();
    let start = *start.get_or_insert(now);
    let left = pace_deadline(pace, start, received).saturating_duration_since(now);
    actix_web::rt::time::timeout(left, payload.next())
        .await
        .map_err(|_elapsed| {
            req.extensions_mut().insert(BodyAbort::TimedOut);
            ApiError::request_timeout(format!(
                "the body did not arrive in time: {received} bytes after {} ms (the whole body \
                 must arrive within {} ms, at {} bytes/s or faster after the first second)",
                start.elapsed().as_millis(),
                pace.timeout.as_millis(),
                pace.min_bytes_per_sec
            ))
        })
}

/// Whether a body may be gzip-encoded (events only, D11).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// Only identity bodies.
    IdentityOnly,
    /// Identity or `Content-Encoding: gzip`.
    AllowGzip,
}

/// Checks `Content-Type: application/json` (parameters such as `charset` allowed, D11).
pub fn check_json_content_type(req: &HttpRequest) -> Result<(), ApiError> {
    let Some(value) = req.headers().get(header::CONTENT_TYPE) else {
        return Err(ApiError::unsupported_media_type(
            "send the body with Content-Type: application/json",
        ));
    };
    let essence = value
        .to_str()
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim();
    if essence.eq_ignore_ascii_case("application/json") {
        Ok(())
    } else {
        Err(ApiError::unsupported_media_type(
            "the body must be application/json",
        ))
    }
}

fn is_gzip(req: &HttpRequest, encoding: Encoding) -> Result<bool, ApiError> {
    let Some(value) = req.headers().get(header::CONTENT_ENCODING) else {
        return Ok(false);
    };
    let value = value.to_str().unwrap_or("").trim();
    if value.is_empty() || value.eq_ignore_ascii_case("identity") {
        Ok(false)
    } else if value.eq_ignore_ascii_case("gzip") && encoding == Encoding::AllowGzip {
        Ok(true)
    } else {
        Err(ApiError::unsupported_media_type(match encoding {
            Encoding::AllowGzip => "Content-Encoding must be gzip or identity",
            Encoding::IdentityOnly => "this route takes uncompressed bodies only",
        }))
    }
}

/// Reads the body as JSON: content type, encoding, `limit` (bytes, decoded) and `pace`
/// enforced while reading; malformed JSON is a 400 `invalid_request`.
pub async fn read_json(
    req: &HttpRequest,
    payload: Payload,
    limit: usize,
    encoding: Encoding,
    pace: &BodyPace,
) -> Result<Value, ApiError> {
    let bytes = read_document(req, payload, limit, encoding, pace).await?;
    serde_json::from_slice(&bytes).map_err(not_json)
}

/// The 400 for a body that is not valid JSON.
pub fn not_json(e: serde_json::Error) -> ApiError {
    ApiError::invalid_request(format!("the body is not valid JSON: {e}"))
}

/// Reads the bytes of a JSON body, for a caller that parses them itself: content type,
/// encoding, `limit` (bytes, decoded) and `pace` enforced while reading; an empty body is a
/// 400.
pub async fn read_document(
    req: &HttpRequest,
    mut payload: Payload,
    limit: usize,
    encoding: Encoding,
    pace: &BodyPace,
) -> Result<Vec<u8>, ApiError> {
    check_json_content_type(req)?;
    let gzip = is_gzip(req, encoding)?;
    // A declared length over the limit is refused before reading a byte. For gzip the raw
    // size bounds nothing useful about the decoded size, but a compressed body larger than the
    // decoded limit cannot be valid either.
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    if declared.is_some_and(|len| len > limit) {
        return Err(ApiError::payload_too_large(limit));
    }
    // The chunks actix read are kept as they came until the body is complete, never sized from
    // the declared length: a client that declares a large body and sends a little of it holds
    // only what it sent (D25). The complete body is then copied once, to its exact size.
    let mut first: Option<Bytes> = None;
    let mut more: Vec<Bytes> = Vec::new();
    let mut read = 0;
    let mut start = None;
    loop {
        // A chunk already buffered (most bodies arrive with their request's head) is taken at
        // once. The wait is boxed: inline, its timer would grow every request's future (which
        // actix boxes) past glibc's per-thread cache sizes (1 KiB), onto malloc's slow path.
        let item = match futures_util::future::poll_immediate(payload.next()).await {
            Some(item) => item,
            // actix's dispatcher polls a request once as soon as its head is parsed, before it
            // decodes the body bytes that came with it: let it, then look again before arming
            // a timer. (The yield's wake-up joins the one the payload registered.)
            None => match yield_then_poll(&mut payload).await {
                Some(item) => item,
                None => Box::pin(wait_for_chunk(req, &mut payload, pace, &mut start, read)).await?,
            },
        };
        let chunk = match item {
            None => break,
            Some(Ok(chunk)) => chunk,
            Some(Err(e)) => {
                req.extensions_mut().insert(BodyAbort::Broken);
                return Err(ApiError::invalid_request(format!(
                    "the body could not be read: {e}"
                )));
            }
        };
        if read + chunk.len() > limit {
            return Err(ApiError::payload_too_large(limit));
        }
        read += chunk.len();
        if first.is_none() {
            first = Some(chunk);
        } else {
            more.push(chunk);
        }
    }
    let mut raw = Vec::with_capacity(read);
    for chunk in first.iter().chain(&more) {
        raw.extend_from_slice(chunk);
    }
    let bytes = if gzip { gunzip(&raw, limit)? } else { raw };
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::invalid_request(
            "the body is empty; send a JSON document",
        ));
    }
    Ok(bytes)
}

/// Decodes one gzip stream, refusing output beyond `limit` bytes and bytes after the stream
/// (D7: the body is one gzip stream; a second member or trailing garbage is not silently
/// ignored).
fn gunzip(raw: &[u8], limit: usize) -> Result<Vec<u8>, ApiError> {
    let mut out = Vec::with_capacity(raw.len().saturating_mul(4).min(limit));
    let mut decoder = flate2::bufread::GzDecoder::new(raw);
    // Reading one byte past the limit tells "exactly at the limit" from "over it".
    (&mut decoder)
        .take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|_| ApiError::invalid_request("the body is not valid gzip"))?;
    if out.len() > limit {
        return Err(ApiError::payload_too_large(limit));
    }
    // The decoder read its stream to the end, trailer included: what is left is not its.
    let rest = decoder.into_inner();
    if !rest.is_empty() {
        return Err(ApiError::invalid_request(format!(
            "the body holds {} bytes after its gzip stream; send one gzip stream",
            rest.len()
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gz(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn gunzip_enforces_the_decoded_limit() {
        assert_eq!(gunzip(&gz(b"[1,2,3]"), 100).unwrap(), b"[1,2,3]");
        assert_eq!(
            gunzip(&gz(&[b' '; 100]), 100).unwrap().len(),
            100,
            "exactly the limit is fine"
        );
        // A bomb: 10 MB of zeros compresses to ~10 KB.
        let bomb = gz(&vec![0u8; 10 * 1024 * 1024]);
        assert!(bomb.len() < 20_000);
        assert_eq!(
            gunzip(&bomb, 256 * 1024).unwrap_err().code,
            "payload_too_large"
        );
        assert_eq!(
            gunzip(b"not gzip", 100).unwrap_err().code,
            "invalid_request"
        );
    }

    #[test]
    fn gunzip_refuses_bytes_after_the_stream() {
        let mut two = gz(b"[1]");
        two.extend_from_slice(&gz(b"[2]"));
        let e = gunzip(&two, 100).unwrap_err();
        assert_eq!(e.code, "invalid_request");
        assert!(e.detail.contains("after its gzip stream"), "{}", e.detail);
        let mut junk = gz(b"[1]");
        junk.extend_from_slice(b"xyz");
        assert!(gunzip(&junk, 100).unwrap_err().detail.contains("3 bytes"));
        assert_eq!(gunzip(&gz(b"[1]"), 100).unwrap(), b"[1]");
    }

    #[test]
    fn the_pace_deadline_is_the_earlier_of_the_whole_and_the_rate() {
        let pace = BodyPace {
            timeout: Duration::from_secs(10),
            min_bytes_per_sec: 1000,
        };
        let t = Instant::now();
        // Nothing received: one second of grace.
        assert_eq!(pace_deadline(&pace, t, 0), t + Duration::from_secs(1));
        // 2,000 bytes earn two more seconds.
        assert_eq!(pace_deadline(&pace, t, 2000), t + Duration::from_secs(3));
        // Never past the whole-body deadline.
        assert_eq!(
            pace_deadline(&pace, t, 1_000_000),
            t + Duration::from_secs(10)
        );
        let no_rate = BodyPace {
            min_bytes_per_sec: 0,
            ..pace
        };
        assert_eq!(pace_deadline(&no_rate, t, 0), t + Duration::from_secs(10));
    }
}
