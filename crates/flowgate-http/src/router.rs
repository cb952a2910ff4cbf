//! The public API's routes, matched by hand.
//!
//! actix's router matches dynamic routes with a regex and runs every scope, resource and
//! middleware as its own boxed service, which costs more per single resolve than the resolve
//! itself (P8). The API has twelve fixed shapes, so [`Endpoint::parse`] splits the path on `/` and compares
//! segments, once per request, and the dispatcher calls the handler directly.
//!
//! The semantics are actix's, which this crate's HTTP tests pin: the path is the one actix routes on
//! (percent-decoded except for reserved characters such as `%2F`), a parameter is one non-empty
//! segment, there is no trailing-slash or case folding, and `/v1` alone or any unknown path
//! under it is a `/v1` path (CORS and rate-limit headers apply) that answers 404.

use actix_web::http::Method;

/// What a request path names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint<'p> {
    /// `/v1/apps/{appId}/placements/{placementId}/resolve`
    Resolve {
        /// The raw `appId` segment.
        app: &'p str,
        /// The raw `placementId` segment.
        placement: &'p str,
    },
    /// `/v1/apps/{appId}/placements/resolve-batch`
    ResolveBatch {
        /// The raw `appId` segment.
        app: &'p str,
    },
    /// `/v1/apps/{appId}/events`
    Events {
        /// The raw `appId` segment.
        app: &'p str,
    },
    /// `/v1/apps/{appId}/store/apple` (D30)
    StoreApple {
        /// The raw `appId` segment.
        app: &'p str,
    },
    /// `/v1/apps/{appId}/store/revenuecat` (D30)
    StoreRevenueCat {
        /// The raw `appId` segment.
        app: &'p str,
    },
    /// `/v1/apps/{appId}/ofrep/v1/evaluate/flags/{key}` (OFREP, D32)
    OfrepFlag {
        /// The raw `appId` segment.
        app: &'p str,
        /// The raw flag key (a placement key).
        key: &'p str,
    },
    /// `/v1/apps/{appId}/ofrep/v1/evaluate/flags` (OFREP bulk, D32)
    OfrepBulk {
        /// The raw `appId` segment.
        app: &'p str,
    },
    /// `/v1/apps/{appId}/ofrep/v1/configuration` (D32)
    OfrepConfiguration {
        /// The raw `appId` segment.
        app: &'p str,
    },
    /// `/v1/placements/{placementId}/resolve` (deprecated, D11)
    LegacyResolve {
        /// The raw `placementId` segment.
        placement: &'p str,
    },
    /// `/v1/events` (deprecated, D11)
    LegacyEvents,
    /// `/openapi.json`
    OpenApi,
    /// `/v1` or a path under it that names nothing.
    UnknownV1,
    /// Anything else.
    Unknown,
}

impl<'p> Endpoint<'p> {
    /// The endpoint a request path names (the path actix routes on: `match_info().as_str()`).
    pub fn parse(path: &'p str) -> Self {
        if path == "/openapi.json" {
            return Endpoint::OpenApi;
        }
        let rest = match path.strip_prefix("/v1") {
            Some("") => return Endpoint::UnknownV1,
            Some(rest) if rest.starts_with('/') => &rest[1..],
            _ => return Endpoint::Unknown,
        };
        // Segments found by a byte loop: `str::split` searches with memchr, whose setup costs
        // more than these short segments.
        let mut from = Some(0);
        let mut next = || {
            let start = from?;
            let end = rest.as_bytes()[start..]
                .iter()
                .position(|&b| b == b'/')
                .map(|i| start + i);
            from = end.map(|e| e + 1);
            rest.get(start..end.unwrap_or(rest.len()))
        };
        let endpoint = match (next(), next(), next(), next(), next()) {
            (Some("apps"), Some(app), Some("ofrep"), Some("v1"), Some(rest)) => {
                match (rest, next(), next(), next()) {
                    ("configuration", None, None, None) => Endpoint::OfrepConfiguration { app },
                    ("evaluate", Some("flags"), None, None) => Endpoint::OfrepBulk { app },
                    ("evaluate", Some("flags"), Some(key), None) => {
                        Endpoint::OfrepFlag { app, key }
                    }
                    _ => Endpoint::UnknownV1,
                }
            }
            (Some("apps"), Some(app), Some("placements"), Some("resolve-batch"), None) => {
                Endpoint::ResolveBatch { app }
            }
            (Some("apps"), Some(app), Some("placements"), Some(placement), Some("resolve"))
                if next().is_none() =>
            {
                Endpoint::Resolve { app, placement }
            }
            (Some("apps"), Some(app), Some("events"), None, None) => Endpoint::Events { app },
            (Some("apps"), Some(app), Some("store"), Some("apple"), None) => {
                Endpoint::StoreApple { app }
            }
            (Some("apps"), Some(app), Some("store"), Some("revenuecat"), None) => {
                Endpoint::StoreRevenueCat { app }
            }
            (Some("placements"), Some(placement), Some("resolve"), None, None) => {
                Endpoint::LegacyResolve { placement }
            }
            (Some("events"), None, None, None, None) => Endpoint::LegacyEvents,
            _ => Endpoint::UnknownV1,
        };
        // A parameter is one non-empty segment, as `{name}` is in actix.
        let empty = match endpoint {
            Endpoint::Resolve { app, placement } => app.is_empty() || placement.is_empty(),
            Endpoint::OfrepFlag { app, key } => app.is_empty() || key.is_empty(),
            Endpoint::ResolveBatch { app }
            | Endpoint::Events { app }
            | Endpoint::StoreApple { app }
            | Endpoint::StoreRevenueCat { app }
            | Endpoint::OfrepBulk { app }
            | Endpoint::OfrepConfiguration { app } => app.is_empty(),
            Endpoint::LegacyResolve { placement } => placement.is_empty(),
            _ => false,
        };
        if empty {
            Endpoint::UnknownV1
        } else {
            endpoint
        }
    }

    /// The route pattern, for metrics and logs (`unmatched` for unknown paths, so a scan of
    /// random paths cannot grow the metrics' label set).
    pub fn pattern(self) -> &'static str {
        match self {
            Endpoint::Resolve { .. } => "/v1/apps/{appId}/placements/{placementId}/resolve",
            Endpoint::ResolveBatch { .. } => "/v1/apps/{appId}/placements/resolve-batch",
            Endpoint::Events { .. } => "/v1/apps/{appId}/events",
            Endpoint::StoreApple { .. } => "/v1/apps/{appId}/store/apple",
            Endpoint::StoreRevenueCat { .. } => "/v1/apps/{appId}/store/revenuecat",
            Endpoint::OfrepFlag { .. } => "/v1/apps/{appId}/ofrep/v1/evaluate/flags/{key}",
            Endpoint::OfrepBulk { .. } => "/v1/apps/{appId}/ofrep/v1/evaluate/flags",
            Endpoint::OfrepConfiguration { .. } => "/v1/apps/{appId}/ofrep/v1/configuration",
            Endpoint::LegacyResolve { .. } => "/v1/placements/{placementId}/resolve",
            Endpoint::LegacyEvents => "/v1/events",
            Endpoint::OpenApi => "/openapi.json",
            Endpoint::UnknownV1 | Endpoint::Unknown => "unmatched",
        }
    }

    /// The one method the endpoint answers (`None` for unknown paths).
    pub fn method(self) -> Option<Method> {
        match self {
            Endpoint::OpenApi | Endpoint::OfrepConfiguration { .. } => Some(Method::GET),
            Endpoint::UnknownV1 | Endpoint::Unknown => None,
            _ => Some(Method::POST),
        }
    }

    /// The raw `appId` segment, for the request's log line.
    pub fn app(self) -> Option<&'p str> {
        match self {
            Endpoint::Resolve { app, .. }
            | Endpoint::ResolveBatch { app }
            | Endpoint::Events { app }
            | Endpoint::StoreApple { app }
            | Endpoint::StoreRevenueCat { app }
            | Endpoint::OfrepFlag { app, .. }
            | Endpoint::OfrepBulk { app }
            | Endpoint::OfrepConfiguration { app } => Some(app),
            _ => None,
        }
    }

    /// Whether the path is under `/v1` (CORS, D11; rate-limit headers, D10).
    pub fn is_v1(self) -> bool {
        !matches!(self, Endpoint::OpenApi | Endpoint::Unknown)
    }
}

#[cfg(test)]
mod tests {
    use super::Endpoint::{self, *};

    #[test]
    fn every_route_is_recognised_with_its_parameters() {
        let cases = [
            (
                "/v1/apps/A/placements/onboarding/resolve",
                Resolve {
                    app: "A",
                    placement: "onboarding",
                },
            ),
            (
                "/v1/apps/A/placements/resolve-batch",
                ResolveBatch { app: "A" },
            ),
            // A placement may be named like the batch route's last segment.
            (
                "/v1/apps/A/placements/resolve-batch/resolve",
                Resolve {
                    app: "A",
                    placement: "resolve-batch",
                },
            ),
            ("/v1/apps/A/events", Events { app: "A" }),
            (
                "/v1/placements/p.1/resolve",
                LegacyResolve { placement: "p.1" },
            ),
            ("/v1/events", LegacyEvents),
            ("/openapi.json", OpenApi),
            (
                "/v1/apps/A/ofrep/v1/evaluate/flags/onboarding",
                OfrepFlag {
                    app: "A",
                    key: "onboarding",
                },
            ),
            ("/v1/apps/A/ofrep/v1/evaluate/flags", OfrepBulk { app: "A" }),
            (
                "/v1/apps/A/ofrep/v1/configuration",
                OfrepConfiguration { app: "A" },
            ),
        ];
        for (path, expected) in cases {
            assert_eq!(Endpoint::parse(path), expected, "{path}");
        }
    }

    #[test]
    fn near_misses_are_unknown_and_keep_their_v1_scope() {
        for path in [
            "/v1",
            "/v1/",
            "/v1/apps",
            "/v1/apps/A",
            "/v1/apps//events",
            "/v1/apps/A/placements//resolve",
            "/v1/apps/A/placements/p/resolve/",
            "/v1/apps/A/placements/p/resolve/x",
            "/v1/apps/A/placements/resolve-batch/",
            "/v1/apps/A/events/",
            "/v1/events/",
            "/v1/Events",
            "/v1/placements//resolve",
            "/v1/placements/p",
        ] {
            assert_eq!(Endpoint::parse(path), UnknownV1, "{path}");
        }
        for path in [
            "/",
            "",
            "/v1x",
            "/v2/events",
            "/openapi.json/",
            "/OPENAPI.json",
        ] {
            assert_eq!(Endpoint::parse(path), Unknown, "{path}");
            assert!(!Endpoint::parse(path).is_v1());
        }
        assert!(Endpoint::parse("/v1/nothing").is_v1());
        assert!(!OpenApi.is_v1());
    }

    #[test]
    fn patterns_methods_and_apps() {
        let resolve = Endpoint::parse("/v1/apps/A/placements/k/resolve");
        assert_eq!(
            resolve.pattern(),
            "/v1/apps/{appId}/placements/{placementId}/resolve"
        );
        assert_eq!(resolve.app(), Some("A"));
        assert_eq!(resolve.method(), Some(actix_web::http::Method::POST));
        assert_eq!(OpenApi.method(), Some(actix_web::http::Method::GET));
        assert_eq!(UnknownV1.pattern(), "unmatched");
        assert_eq!(Unknown.method(), None);
        assert_eq!(LegacyEvents.app(), None);
    }
}
