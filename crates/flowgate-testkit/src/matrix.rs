//! [`per_backend!`](crate::per_backend): the one way the workspace's tests run a case on
//! several backends.

/// Defines each case once per backend: `mod <case> { fn <backend>() }`, so a case's tests are
/// named `<case>::postgres`, `<case>::sqlite`, ... and can be filtered by either part.
///
/// The first argument is the test attribute; the second lists the backends, each with the
/// expression that makes its fixture, an `Option` (`None` skips, as [`TestDb::postgres`]
/// does on purpose when told to). Then the cases, each an `async fn` whose one parameter is
/// bound to the fixture and whose body is written once:
///
/// ```text
/// flowgate_testkit::per_backend! {
///     #[tokio::test]
///     [postgres => TestDb::postgres().await, sqlite => Some(TestDb::sqlite().await)]
///     async fn round_trip(db) { /* ... */ }
/// }
/// ```
///
/// A crate wraps it once with its backends and test attribute (the store's `backend_tests!`,
/// the contract suite's `contract_tests!`, the HTTP tests' `on_both_stores!`).
///
/// [`TestDb::postgres`]: crate::TestDb::postgres
#[macro_export]
macro_rules! per_backend {
    (
        #[$test:meta] $backends:tt
        $(async fn $case:ident($fixture:ident) $body:block)*
    ) => {$(
        $crate::per_backend!(@case #[$test] $backends $case $fixture $body);
    )*};
    (
        @case #[$test:meta] [$($backend:ident => $make:expr),+ $(,)?]
        $case:ident $fixture:ident $body:block
    ) => {
        mod $case {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[$test]
                async fn $backend() {
                    let Some($fixture) = $make else { return };
                    $body
                }
            )+
        }
    };
}
