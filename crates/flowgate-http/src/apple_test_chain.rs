//! Test chains for App Store signatures (D30), behind the feature `test-util` (and in this
//! crate's own tests): [`TestSigner`] signs as the App Store does under a root of its own, and
//! [`TestChain`] forges the chains [`crate::apple_jws::verify`] must refuse (no marker
//! extension, an intermediate that is no CA, a P-384 leaf, a leaf out of its validity).
//! Nothing here is in the release binary; the demo's signer, which is, is
//! [`crate::apple_demo_signer::DemoSigner`].

use std::ops::Deref;

use time::OffsetDateTime;

use crate::apple_demo_signer::{ChainShape, DemoSigner};

/// The shape of the chain a [`TestSigner`] makes. The default is a valid chain, shaped like
/// Apple's; the other settings forge the bad chains the tests refuse.
#[derive(Debug, Clone)]
pub struct TestChain {
    /// Whether the intermediate carries [`crate::apple_jws::INTERMEDIATE_MARKER_OID`]
    /// (default `true`).
    pub intermediate_marker: bool,
    /// Whether the intermediate is a CA (default `true`).
    pub intermediate_ca: bool,
    /// Whether the leaf carries [`crate::apple_jws::LEAF_MARKER_OID`] (default `true`).
    pub leaf_marker: bool,
    /// Whether the leaf's key is P-384 instead of P-256 (default `false`); [`TestSigner`]
    /// then signs with ECDSA P-384 (96 bytes), which [`crate::apple_jws::verify`] refuses.
    pub leaf_p384: bool,
    /// The start of the leaf's validity (default: ten years before its creation).
    pub leaf_not_before: OffsetDateTime,
    /// The end of the leaf's validity (default: ten years after its creation).
    pub leaf_not_after: OffsetDateTime,
}

impl Default for TestChain {
    fn default() -> Self {
        let apple = ChainShape::apple();
        Self {
            intermediate_marker: apple.intermediate_marker,
            intermediate_ca: apple.intermediate_ca,
            leaf_marker: apple.leaf_marker,
            leaf_p384: apple.leaf_p384,
            leaf_not_before: apple.leaf_not_before,
            leaf_not_after: apple.leaf_not_after,
        }
    }
}

/// Signs payloads as the App Store does, with a chain of [`TestChain`]'s shape under a root
/// generated for it; [`crate::apple_jws::verify`] accepts a valid one with
/// [`DemoSigner::roots`] trusted. Everything a [`DemoSigner`] does, through `Deref`.
#[derive(Debug)]
pub struct TestSigner(DemoSigner);

impl Default for TestSigner {
    fn default() -> Self {
        Self::new()
    }
}

impl TestSigner {
    /// A valid chain under a new root ([`TestChain::default`]).
    ///
    /// # Panics
    ///
    /// When the operating system's random generator fails (key generation).
    pub fn new() -> Self {
        Self::with(TestChain::default())
    }

    /// A chain of the given shape under a new root.
    ///
    /// # Panics
    ///
    /// When the operating system's random generator fails (key generation).
    pub fn with(chain: TestChain) -> Self {
        let shape = ChainShape {
            intermediate_marker: chain.intermediate_marker,
            intermediate_ca: chain.intermediate_ca,
            leaf_marker: chain.leaf_marker,
            leaf_p384: chain.leaf_p384,
            leaf_not_before: chain.leaf_not_before,
            leaf_not_after: chain.leaf_not_after,
        };
        match DemoSigner::generate_shaped(&shape) {
            Ok(signer) => Self(signer),
            Err(e) => panic!("cannot generate the test App Store chain: {e}"),
        }
    }
}

impl Deref for TestSigner {
    type Target = DemoSigner;

    fn deref(&self) -> &DemoSigner {
        &self.0
    }
}
