//! Every case of the port's contract suite (`flowgate_contract_tests::sticky_store`), each on a
//! fresh, empty store: a key prefix of its own on the shared Redis.

macro_rules! contract {
    ($($case:ident),* $(,)?) => {
        flowgate_testkit::per_backend! {
            #[tokio::test]
            [redis => Some(crate::support::Fixture::new().await)]
            $(async fn $case(fixture) {
                flowgate_contract_tests::sticky_store::$case(&fixture.store).await;
            })*
        }
    };
}

contract!(
    unknown_identifiers_are_absent,
    documents_round_trip,
    writes_merge_into_stored_documents,
    apps_are_isolated,
    combined_reads_keep_apps_apart,
    identifiers_are_opaque,
    large_batches,
    entries_that_are_not_assignments_are_skipped,
);
