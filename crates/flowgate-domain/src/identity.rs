//! The identity every resolve and event carries (`user_id`, `session_id`, `device_platform`:
//! docs/api.md, D3.6, D7).

use std::fmt;

use serde::{Deserialize, Serialize};

/// The device platform of the SDK: `ios`, `android` or `web` (D7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Platform {
    /// Apple iOS.
    Ios,
    /// Android.
    Android,
    /// A web browser.
    Web,
}

impl Platform {
    /// Every platform, in their documented order.
    pub const ALL: [Platform; 3] = [Platform::Ios, Platform::Android, Platform::Web];

    /// Parses the wire name; anything but the three lower-case names is `None`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "ios" => Some(Self::Ios),
            "android" => Some(Self::Android),
            "web" => Some(Self::Web),
            _ => None,
        }
    }

    /// The wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Ios => "ios",
            Self::Android => "android",
            Self::Web => "web",
        }
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
