//! Placement keys (D2): 1..=128 characters of `A-Za-z0-9_.:-`.

/// Longest placement key (D2).
pub const MAX_PLACEMENT_KEY_LEN: usize = 128;

/// Why a string is not a placement key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlacementKeyError {
    /// Empty.
    #[error("a placement key must not be empty")]
    Empty,
    /// Longer than 128 characters.
    #[error("a placement key has at most 128 characters")]
    TooLong,
    /// A character outside `A-Za-z0-9_.:-`.
    #[error("a placement key has only the characters A-Z a-z 0-9 _ . : -")]
    InvalidCharacter,
}

/// Checks a placement key (D2). The HTTP adapter answers 400 for a bad key (D6, D9) before
/// any lookup.
pub fn validate_placement_key(key: &str) -> Result<(), PlacementKeyError> {
    if key.is_empty() {
        return Err(PlacementKeyError::Empty);
    }
    if key.len() > MAX_PLACEMENT_KEY_LEN {
        return Err(PlacementKeyError::TooLong);
    }
    if !key
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-'))
    {
        return Err(PlacementKeyError::InvalidCharacter);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement_key_rules() {
        assert_eq!(validate_placement_key("onboarding"), Ok(()));
        assert_eq!(validate_placement_key("A-z_0.9:x"), Ok(()));
        assert_eq!(validate_placement_key(&"k".repeat(128)), Ok(()));
        assert_eq!(
            validate_placement_key(&"k".repeat(129)),
            Err(PlacementKeyError::TooLong)
        );
        assert_eq!(validate_placement_key(""), Err(PlacementKeyError::Empty));
        assert_eq!(
            validate_placement_key("a b"),
            Err(PlacementKeyError::InvalidCharacter)
        );
        assert_eq!(
            validate_placement_key("a/b"),
            Err(PlacementKeyError::InvalidCharacter)
        );
        assert_eq!(
            validate_placement_key("é"),
            Err(PlacementKeyError::InvalidCharacter)
        );
    }
}
