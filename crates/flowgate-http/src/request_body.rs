//! Request bodies: media type, content encoding and size checked while reading (D7, D11).
//! A body is never buffered beyond its limit, and a gzip body's limit applies to the decoded
//! bytes, decoded incrementally so a decompression bomb stops at the limit.

use std::io::Read;

use actix_web::dev::Payload;
use actix_web::http::header;
use actix_web::HttpRequest;
use futures_util::StreamExt;
use serde_json::Value;

use crate::problem::ApiError;

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

/// Reads the body as JSON: content type, encoding and `limit` (bytes, decoded) enforced while
/// reading; malformed JSON is a 400 `invalid_request`.
pub async fn read_json(
    req: &HttpRequest,
    payload: Payload,
    limit: usize,
    encoding: Encoding,
) -> Result<Value, ApiError> {
    let bytes = read_document(req, payload, limit, encoding).await?;
    serde_json::from_slice(&bytes).map_err(not_json)
}

/// The 400 for a body that is not valid JSON.
pub fn not_json(e: serde_json::Error) -> ApiError {
    ApiError::invalid_request(format!("the body is not valid JSON: {e}"))
}

/// Reads the bytes of a JSON body, for a caller that parses them itself: content type,
/// encoding and `limit` (bytes, decoded) enforced while reading; an empty body is a 400.
pub async fn read_document(
    req: &HttpRequest,
    mut payload: Payload,
    limit: usize,
    encoding: Encoding,
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
    // Sized once from the declared length, up to 64 KiB (typical bodies), so a client that
    // declares a large body and sends nothing does not get memory reserved for it.
    let mut raw = Vec::with_capacity(declared.unwrap_or(0).min(64 * 1024));
    while let Some(chunk) = payload.next().await {
        let chunk = chunk
            .map_err(|e| ApiError::invalid_request(format!("the body could not be read: {e}")))?;
        if raw.len() + chunk.len() > limit {
            return Err(ApiError::payload_too_large(limit));
        }
        raw.extend_from_slice(&chunk);
    }
    let bytes = if gzip { gunzip(&raw, limit)? } else { raw };
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::invalid_request(
            "the body is empty; send a JSON document",
        ));
    }
    Ok(bytes)
}

/// Reads and drops a body the handler refuses without looking at it, so the connection stays
/// usable for the client's next request (actix closes a connection whose request body was
/// left unread). Stops after `limit` bytes or on a read error; the connection then closes.
pub async fn discard(payload: &mut Payload, limit: usize) {
    let mut read = 0usize;
    while let Some(Ok(chunk)) = payload.next().await {
        read = read.saturating_add(chunk.len());
        if read > limit {
            return;
        }
    }
}

/// Decodes gzip, refusing output beyond `limit` bytes.
fn gunzip(raw: &[u8], limit: usize) -> Result<Vec<u8>, ApiError> {
    let mut out = Vec::with_capacity(raw.len().saturating_mul(4).min(limit));
    let decoder = flate2::read::GzDecoder::new(raw);
    // Reading one byte past the limit tells "exactly at the limit" from "over it".
    let mut limited = decoder.take(limit as u64 + 1);
    limited
        .read_to_end(&mut out)
        .map_err(|_| ApiError::invalid_request("the body is not valid gzip"))?;
    if out.len() > limit {
        return Err(ApiError::payload_too_large(limit));
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
}
