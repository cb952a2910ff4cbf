//! Work of the admin listener that must not run on its worker: results reads (D22) and the
//! console's catalog previews (D24). The admin listener has one worker thread; a report folds
//! its rows and a preview parses and diffs a whole catalog, and run there they held up every
//! request behind them (`/readyz` included) and competed with the API's workers as equals.
//!
//! [`Background`] runs such work on a runtime of its own (built by the binary: one worker
//! thread, blocking threads for SQLite, all at a lower scheduling priority so that the API's
//! workers win the cores when both want them), and bounds it: reports by the results reader's
//! connections (`experiments.max_connections`, held to the end of each read), previews one at a
//! time ([`Background::preview_permit`], held by the work itself, so a client that leaves does
//! not free it while the work runs on), so that the memory of previews is that of one beside
//! the uploads being read (at most 8 MiB each, after sign-in and the CSRF check).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use flowgate_domain::ids::ExperimentId;
use flowgate_domain::ports::{BoxFuture, ResultsSource, StoreError};
use flowgate_domain::results::{ExposureCountQuery, ResultsData, ResultsQuery};
use tokio::runtime::Handle;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Where the admin listener's heavy work runs. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Background {
    handle: Handle,
    previews: Arc<Semaphore>,
}

impl Background {
    /// Runs work on the runtime of `handle`.
    pub fn new(handle: Handle) -> Self {
        Self {
            handle,
            previews: Arc::new(Semaphore::new(1)),
        }
    }

    /// Runs work on the calling runtime (tests, tools).
    pub fn current() -> Self {
        Self::new(Handle::current())
    }

    /// Runs `work` there and waits for it; `None` when it could not finish (it panicked, or
    /// the runtime is shutting down). Dropping the returned future does not stop `work`.
    pub async fn run<T, F>(&self, work: F) -> Option<T>
    where
        T: Send + 'static,
        F: Future<Output = T> + Send + 'static,
    {
        match self.handle.spawn(work).await {
            Ok(value) => Some(value),
            Err(e) => {
                tracing::error!(error = %e, "background work did not finish");
                None
            }
        }
    }

    /// The turn of one catalog preview: previews run one at a time. (`None` cannot happen:
    /// the semaphore is never closed.)
    pub async fn preview_permit(&self) -> Option<OwnedSemaphorePermit> {
        Arc::clone(&self.previews).acquire_owned().await.ok()
    }

    /// `source`, read on this runtime.
    pub fn results(&self, source: Arc<dyn ResultsSource>) -> Arc<dyn ResultsSource> {
        Arc::new(OffWorker {
            inner: source,
            background: self.clone(),
        })
    }
}

/// A [`ResultsSource`] whose reads run on [`Background`].
struct OffWorker {
    inner: Arc<dyn ResultsSource>,
    background: Background,
}

fn unfinished() -> StoreError {
    StoreError::Other {
        detail: "the results read did not finish (see the log)".to_owned(),
    }
}

impl ResultsSource for OffWorker {
    fn experiment_results<'a>(
        &'a self,
        query: &'a ResultsQuery,
    ) -> BoxFuture<'a, Result<ResultsData, StoreError>> {
        let (inner, query) = (Arc::clone(&self.inner), query.clone());
        Box::pin(async move {
            self.background
                .run(async move { inner.experiment_results(&query).await })
                .await
                .unwrap_or_else(|| Err(unfinished()))
        })
    }

    fn exposure_counts<'a>(
        &'a self,
        query: &'a ExposureCountQuery,
    ) -> BoxFuture<'a, Result<BTreeMap<ExperimentId, u64>, StoreError>> {
        let (inner, query) = (Arc::clone(&self.inner), query.clone());
        Box::pin(async move {
            self.background
                .run(async move { inner.exposure_counts(&query).await })
                .await
                .unwrap_or_else(|| Err(unfinished()))
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use flowgate_domain::ids::AppId;

    use super::*;

    /// Records the thread each read ran on.
    #[derive(Default)]
    struct Where(Mutex<Vec<Option<String>>>);

    impl ResultsSource for Where {
        fn experiment_results<'a>(
            &'a self,
            _: &'a ResultsQuery,
        ) -> BoxFuture<'a, Result<ResultsData, StoreError>> {
            Box::pin(async { Ok(ResultsData::default()) })
        }

        fn exposure_counts<'a>(
            &'a self,
            _: &'a ExposureCountQuery,
        ) -> BoxFuture<'a, Result<BTreeMap<ExperimentId, u64>, StoreError>> {
            let name = std::thread::current().name().map(str::to_owned);
            self.0.lock().unwrap().push(name);
            Box::pin(async { Ok(BTreeMap::new()) })
        }
    }

    #[test]
    fn results_are_read_on_the_background_runtime_not_the_callers() {
        let background = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("background-test")
            .enable_all()
            .build()
            .unwrap();
        let source = Arc::new(Where::default());
        let off = Background::new(background.handle().clone())
            .results(Arc::clone(&source) as Arc<dyn ResultsSource>);
        let caller = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let query = ExposureCountQuery {
            app_id: AppId(uuid::Uuid::nil()),
            experiments: Vec::new(),
            to: time::OffsetDateTime::now_utc(),
        };
        caller.block_on(off.exposure_counts(&query)).unwrap();
        assert_eq!(
            *source.0.lock().unwrap(),
            [Some("background-test".to_owned())]
        );
        background.shutdown_background();
    }

    #[tokio::test]
    async fn previews_take_turns() {
        let background = Background::current();
        let first = background.preview_permit().await.unwrap();
        let second = background.preview_permit();
        tokio::pin!(second);
        assert!(
            tokio::time::timeout(std::time::Duration::from_millis(50), &mut second)
                .await
                .is_err(),
            "a second preview waits for the first"
        );
        drop(first);
        assert!(second.await.is_some());
    }
}
