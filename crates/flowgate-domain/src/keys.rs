//! API keys (D1): `fg_<env>_<random><checksum>`.
//!
//! `<random>` is 30 base62 characters from a CSPRNG and `<checksum>` the CRC-32 (IEEE) of
//! `<random>` in base62, six characters, so a typo or garbage is rejected by [`ApiKey::parse`]
//! without touching any key table. Only the SHA-256 [`KeyDigest`] and a 12-character display
//! prefix are ever stored.

use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;

use crate::ids::{KeyId, WorkspaceId};

const PRODUCT_PREFIX: &str = "fg_";
const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
/// Length of the random part (D1).
pub const RANDOM_LEN: usize = 30;
/// Length of the checksum part (D1). 62^6 > 2^32, so every CRC-32 fits.
pub const CHECKSUM_LEN: usize = 6;
/// Length of the stored display prefix (D1).
pub const DISPLAY_PREFIX_LEN: usize = 12;

/// The environment a key belongs to; each deployment accepts one (D1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyEnvironment {
    /// Production keys, `fg_live_...`.
    Live,
    /// Staging and development keys, `fg_test_...`.
    Test,
}

impl KeyEnvironment {
    /// The name used in the key and in configuration.
    pub const fn as_str(self) -> &'static str {
        match self {
            KeyEnvironment::Live => "live",
            KeyEnvironment::Test => "test",
        }
    }

    /// Parses `live` or `test`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "live" => Some(KeyEnvironment::Live),
            "test" => Some(KeyEnvironment::Test),
            _ => None,
        }
    }
}

impl fmt::Display for KeyEnvironment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The kind of key (D1, D30): `sdk` keys call the SDK routes, `webhook` keys the store
/// notification routes, and neither the other's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyType {
    /// Publishable SDK key, allowed on every SDK route (`/v1/.../resolve`, `/events`, ...).
    Sdk,
    /// Server-side dashboard key; rejected here with `key_type_not_allowed`.
    Secret,
    /// A store's notifications (D30: RevenueCat sends it in the `Authorization` header),
    /// allowed on the store routes of its workspace's apps only; the SDK routes reject it
    /// with `key_type_not_allowed`. Stored apart from the other types (`webhook_keys`, D26:
    /// a release that does not know the type never reads it).
    Webhook,
}

impl KeyType {
    /// The stored name.
    pub const fn as_str(self) -> &'static str {
        match self {
            KeyType::Sdk => "sdk",
            KeyType::Secret => "secret",
            KeyType::Webhook => "webhook",
        }
    }

    /// Parses `sdk`, `secret` or `webhook`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "sdk" => Some(KeyType::Sdk),
            "secret" => Some(KeyType::Secret),
            "webhook" => Some(KeyType::Webhook),
            _ => None,
        }
    }
}

impl fmt::Display for KeyType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a presented key string is not a well-formed key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyFormatError {
    /// It does not start with `fg_live_` or `fg_test_`.
    #[error("the key does not start with fg_live_ or fg_test_")]
    Prefix,
    /// The part after the prefix is not 36 base62 characters.
    #[error("the key does not have the expected length and alphabet")]
    Shape,
    /// The checksum does not match the random part (a typo or a made-up key).
    #[error("the key's checksum does not match")]
    Checksum,
}

/// A plaintext API key. It is shown once at creation and never stored (D1); `Debug` and
/// `Display` redact it so it cannot end up in a log by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey {
    text: String,
    environment: KeyEnvironment,
}

impl ApiKey {
    /// Generates a new key of `environment` from the operating system's CSPRNG.
    #[cfg(feature = "server")]
    pub fn generate(environment: KeyEnvironment) -> Result<Self, getrandom::Error> {
        let mut random = String::with_capacity(RANDOM_LEN);
        // Rejection sampling keeps the distribution uniform: 248 = 4 * 62.
        let mut buf = [0u8; 64];
        while random.len() < RANDOM_LEN {
            getrandom::fill(&mut buf)?;
            for &b in &buf {
                if b < 248 && random.len() < RANDOM_LEN {
                    random.push(char::from(BASE62[usize::from(b % 62)]));
                }
            }
        }
        Ok(Self::from_random(environment, &random))
    }

    /// Builds the key for a given random part (which must be base62); used by tests and
    /// fixtures that need stable keys.
    pub fn from_random(environment: KeyEnvironment, random: &str) -> Self {
        let mut text = String::with_capacity(8 + RANDOM_LEN + CHECKSUM_LEN);
        text.push_str(PRODUCT_PREFIX);
        text.push_str(environment.as_str());
        text.push('_');
        text.push_str(random);
        text.extend(checksum(random).map(char::from));
        Self { text, environment }
    }

    /// Checks shape and checksum (D1). This is all the work done for garbage: no lookup.
    pub fn parse(s: &str) -> Result<Self, KeyFormatError> {
        let environment = Self::check(s)?;
        Ok(Self {
            text: s.to_owned(),
            environment,
        })
    }

    /// What [`ApiKey::parse`] checks, without copying the key: its environment when `s` is a
    /// well-formed key.
    pub fn check(s: &str) -> Result<KeyEnvironment, KeyFormatError> {
        let rest = s
            .strip_prefix(PRODUCT_PREFIX)
            .ok_or(KeyFormatError::Prefix)?;
        let (environment, body) = if let Some(body) = rest.strip_prefix("live_") {
            (KeyEnvironment::Live, body)
        } else if let Some(body) = rest.strip_prefix("test_") {
            (KeyEnvironment::Test, body)
        } else {
            return Err(KeyFormatError::Prefix);
        };
        if body.len() != RANDOM_LEN + CHECKSUM_LEN
            || !body.bytes().all(|b| b.is_ascii_alphanumeric())
        {
            return Err(KeyFormatError::Shape);
        }
        let (random, check) = body.split_at(RANDOM_LEN);
        if checksum(random) != check.as_bytes() {
            return Err(KeyFormatError::Checksum);
        }
        Ok(environment)
    }

    /// The environment named in the key.
    pub fn environment(&self) -> KeyEnvironment {
        self.environment
    }

    /// The SHA-256 digest under which the key is stored and looked up.
    pub fn digest(&self) -> KeyDigest {
        KeyDigest::of(&self.text)
    }

    /// The first 12 characters, safe to store and show (e.g. `fg_live_AbCd`).
    pub fn display_prefix(&self) -> &str {
        &self.text[..DISPLAY_PREFIX_LEN]
    }

    /// The plaintext. Call only to show the key once to its creator.
    pub fn expose(&self) -> &str {
        &self.text
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ApiKey({}…)", self.display_prefix())
    }
}

impl FromStr for ApiKey {
    type Err = KeyFormatError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ApiKey::parse(s)
    }
}

/// CRC-32 (IEEE) of the random part in base62, most significant digit first, padded to six
/// (ASCII digits; no allocation, as every authenticated request computes it).
fn checksum(random: &str) -> [u8; CHECKSUM_LEN] {
    let mut n = crc32fast::hash(random.as_bytes());
    let mut digits = [b'0'; CHECKSUM_LEN];
    for slot in digits.iter_mut().rev() {
        *slot = BASE62[(n % 62) as usize];
        n /= 62;
    }
    digits
}

/// SHA-256 digest of a key's full text: what the store keeps instead of the key (D1).
///
/// It hashes as its first eight bytes: a SHA-256 output is uniform already, so a map keyed by
/// digests need not hash it again.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct KeyDigest(pub [u8; 32]);

impl Hash for KeyDigest {
    fn hash<H: Hasher>(&self, state: &mut H) {
        let mut first = [0u8; 8];
        first.copy_from_slice(&self.0[..8]);
        state.write_u64(u64::from_le_bytes(first));
    }
}

/// A map keyed by [`KeyDigest`]s that uses the digest's own bits as the hash: one lookup per
/// request authenticates a key, and hashing 32 uniform bytes again cost more than the lookup.
/// Lookups cannot be steered into collisions: the digests are SHA-256 outputs of what a client
/// sends, and the table holds only the catalog's keys.
pub(crate) type DigestMap<V> = HashMap<KeyDigest, V, BuildHasherDefault<DigestHasher>>;

/// The hasher of [`DigestMap`]: a digest's first eight bytes as they are.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct DigestHasher(u64);

impl Hasher for DigestHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `KeyDigest::hash` feeds this hasher, through `write_u64`; any other input is
        // folded in, so the hasher stays correct if that changes.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
}

impl KeyDigest {
    /// Digest of a key's text.
    pub fn of(key_text: &str) -> Self {
        Self(Sha256::digest(key_text.as_bytes()).into())
    }

    /// Lower-case hex, as stored in text columns and files.
    pub fn to_hex(&self) -> String {
        let mut s = String::with_capacity(64);
        for b in self.0 {
            s.push(char::from(HEX[usize::from(b >> 4)]));
            s.push(char::from(HEX[usize::from(b & 0xf)]));
        }
        s
    }

    /// Parses 64 hex digits.
    pub fn from_hex(s: &str) -> Option<Self> {
        let bytes = s.as_bytes();
        if bytes.len() != 64 {
            return None;
        }
        let mut out = [0u8; 32];
        for (i, pair) in bytes.chunks_exact(2).enumerate() {
            let hi = hex_val(pair[0])?;
            let lo = hex_val(pair[1])?;
            out[i] = (hi << 4) | lo;
        }
        Some(Self(out))
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn hex_val(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

impl fmt::Debug for KeyDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeyDigest({})", self.to_hex())
    }
}

impl Serialize for KeyDigest {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for KeyDigest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        KeyDigest::from_hex(&s).ok_or_else(|| serde::de::Error::custom("expected 64 hex digits"))
    }
}

/// What the store keeps about a key (D1): never the plaintext.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyRecord {
    /// Record id (used by `flowgate keys revoke`).
    pub id: KeyId,
    /// The workspace the key belongs to.
    pub workspace_id: WorkspaceId,
    /// SHA-256 of the key.
    pub digest: KeyDigest,
    /// First 12 characters of the key, for display.
    pub display_prefix: String,
    /// Key type.
    pub key_type: KeyType,
    /// Key environment.
    pub environment: KeyEnvironment,
    /// Human name (e.g. "ios").
    pub name: String,
    /// Creation time.
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    /// Revocation time; a revoked key is rejected like an unknown one (D1). Missing reads as
    /// not revoked (D26: a missing optional member is absent).
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub revoked_at: Option<OffsetDateTime>,
}

impl KeyRecord {
    /// A record for a freshly generated or imported key.
    pub fn new(
        id: KeyId,
        workspace_id: WorkspaceId,
        key: &ApiKey,
        key_type: KeyType,
        name: impl Into<String>,
        created_at: OffsetDateTime,
    ) -> Self {
        Self {
            id,
            workspace_id,
            digest: key.digest(),
            display_prefix: key.display_prefix().to_owned(),
            key_type,
            environment: key.environment(),
            name: name.into(),
            created_at,
            revoked_at: None,
        }
    }

    /// True once revoked.
    pub fn is_revoked(&self) -> bool {
        self.revoked_at.is_some()
    }
}

/// Why a request's credentials were refused (D1, D9); each maps to 401 with its code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// No `Authorization: Bearer` header.
    #[error("missing API key")]
    MissingApiKey,
    /// Malformed, unknown or revoked key.
    #[error("invalid API key")]
    InvalidApiKey,
    /// A key of a type the route does not take: other than `sdk` on the SDK routes, other
    /// than `webhook` on the store routes (D30).
    #[error("this key type is not allowed here; use an SDK key")]
    KeyTypeNotAllowed,
    /// A key of the other environment than the deployment accepts.
    #[error("this key belongs to another environment")]
    KeyEnvironmentMismatch,
}

impl AuthError {
    /// The stable problem code (D9).
    pub const fn code(self) -> &'static str {
        match self {
            AuthError::MissingApiKey => "missing_api_key",
            AuthError::InvalidApiKey => "invalid_api_key",
            AuthError::KeyTypeNotAllowed => "key_type_not_allowed",
            AuthError::KeyEnvironmentMismatch => "key_environment_mismatch",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_parse_and_have_the_d1_shape() {
        let key = ApiKey::generate(KeyEnvironment::Live).expect("csprng");
        let text = key.expose();
        assert!(text.starts_with("fg_live_"));
        assert_eq!(text.len(), 8 + RANDOM_LEN + CHECKSUM_LEN);
        assert_eq!(ApiKey::parse(text), Ok(key.clone()));
        assert_eq!(key.display_prefix().len(), 12);
        assert_ne!(ApiKey::generate(KeyEnvironment::Live).expect("csprng"), key);
    }

    #[test]
    fn checksum_matches_zlib_crc32_in_base62() {
        // Expected values computed independently with Python's zlib.crc32 and a base62
        // conversion (D1 names zlib.crc32 as the reference).
        assert_eq!(&checksum("123456789"), b"3jZRME");
        assert_eq!(&checksum(&"a".repeat(30)), b"1yLcDB");
        assert_eq!(&checksum(&"x".repeat(30)), b"13M0X2");
        // crc32("") is 0: padding only.
        assert_eq!(&checksum(""), b"000000");
        let key = ApiKey::from_random(KeyEnvironment::Live, &"a".repeat(30));
        assert_eq!(key.expose(), format!("fg_live_{}1yLcDB", "a".repeat(30)));
    }

    #[test]
    fn malformed_keys_are_rejected_with_the_reason() {
        let good = ApiKey::from_random(KeyEnvironment::Test, &"x".repeat(30));
        let text = good.expose().to_owned();
        assert_eq!(
            ApiKey::parse(&text).map(|k| k.environment()),
            Ok(KeyEnvironment::Test)
        );
        assert_eq!(ApiKey::parse("sk_live_abc"), Err(KeyFormatError::Prefix));
        assert_eq!(ApiKey::parse("fg_prod_abc"), Err(KeyFormatError::Prefix));
        assert_eq!(ApiKey::parse("fg_live_short"), Err(KeyFormatError::Shape));
        let mut non_ascii = text.clone();
        non_ascii.replace_range(10..11, "é");
        assert!(matches!(
            ApiKey::parse(&non_ascii),
            Err(KeyFormatError::Shape)
        ));
        // One changed character of the random part breaks the checksum.
        let mut typo = text.clone().into_bytes();
        typo[10] = if typo[10] == b'y' { b'z' } else { b'y' };
        let typo = String::from_utf8(typo).expect("ascii");
        assert_eq!(ApiKey::parse(&typo), Err(KeyFormatError::Checksum));
        assert_eq!(ApiKey::parse(""), Err(KeyFormatError::Prefix));
        // `check`, which authentication calls without copying the key, gives the same verdicts.
        let live = ApiKey::from_random(KeyEnvironment::Live, &"x".repeat(30));
        assert_eq!(ApiKey::check(live.expose()), Ok(KeyEnvironment::Live));
        assert_eq!(ApiKey::check(&text), Ok(KeyEnvironment::Test));
        for bad in [
            "sk_live_abc",
            "fg_prod_abc",
            "fg_live_short",
            &non_ascii,
            &typo,
            "",
        ] {
            assert_eq!(
                ApiKey::check(bad),
                ApiKey::parse(bad).map(|k| k.environment()),
                "{bad}"
            );
        }
    }

    #[test]
    fn key_types_round_trip_by_name() {
        for (key_type, name) in [
            (KeyType::Sdk, "sdk"),
            (KeyType::Secret, "secret"),
            (KeyType::Webhook, "webhook"),
        ] {
            assert_eq!(key_type.as_str(), name);
            assert_eq!(key_type.to_string(), name);
            assert_eq!(KeyType::parse(name), Some(key_type));
            let json = serde_json::to_string(&key_type).expect("serialises");
            assert_eq!(json, format!("\"{name}\""));
            assert_eq!(
                serde_json::from_str::<KeyType>(&json).expect("reads"),
                key_type
            );
        }
        assert_eq!(KeyType::parse("Webhook"), None);
        assert_eq!(KeyType::parse("admin"), None);
    }

    #[test]
    fn debug_never_shows_the_plaintext() {
        let key = ApiKey::from_random(KeyEnvironment::Live, &"Q".repeat(30));
        let shown = format!("{key:?}");
        assert!(!shown.contains(&"Q".repeat(30)), "{shown}");
        assert!(shown.starts_with("ApiKey(fg_live_QQQQ"));
    }

    #[test]
    fn digest_is_sha256_of_the_text_and_round_trips_as_hex() {
        let d = KeyDigest::of("abc");
        assert_eq!(
            d.to_hex(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(KeyDigest::from_hex(&d.to_hex()), Some(d));
        assert_eq!(KeyDigest::from_hex(&d.to_hex().to_uppercase()), Some(d));
        assert_eq!(KeyDigest::from_hex("zz"), None);
    }
}
