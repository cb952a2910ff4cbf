//! `flowgate explain` (D18): what resolve would answer for a request on the stored catalog,
//! and why.

use std::path::Path;

use flowgate_domain::ports::CatalogSource;
use flowgate_domain::Catalog;
use flowgate_store::Store;

use crate::cli::ExitCode;
use crate::config::Config;
use crate::terminal::{errln, outln};

/// The request body: JSON text, `@FILE` for a file's, or `-` for standard input's.
fn read_body(body: &str) -> Result<Vec<u8>, String> {
    if body == "-" {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut bytes)
            .map_err(|e| format!("cannot read the body from standard input: {e}"))?;
        return Ok(bytes);
    }
    match body.strip_prefix('@') {
        Some(path) => std::fs::read(Path::new(path))
            .map_err(|e| format!("cannot read the body from `{path}`: {e}")),
        None => Ok(body.as_bytes().to_vec()),
    }
}

/// `flowgate explain --app ID --placement KEY --body JSON [--json]`
pub async fn explain(
    store: &Store,
    config: &Config,
    app: &str,
    placement: &str,
    body: &str,
    json: bool,
) -> ExitCode {
    let body = match read_body(body) {
        Ok(body) => body,
        Err(e) => {
            errln!("flowgate: {e}");
            return ExitCode::Failure;
        }
    };
    let data = match store.load_catalog().await {
        Ok(data) => data,
        Err(e) => {
            errln!("flowgate: the catalog could not be read: {e}");
            return ExitCode::Failure;
        }
    };
    let revision = data.revision;
    let catalog = match Catalog::build(data) {
        Ok(catalog) => catalog,
        Err(e) => {
            errln!("flowgate: the stored catalog does not build: {e}");
            return ExitCode::Failure;
        }
    };
    let sticky = match crate::adapters::sticky_store(config, store).await {
        Ok(sticky) => sticky,
        Err(code) => return code,
    };
    let explained = match flowgate_http::explain::explain(
        &catalog,
        app,
        placement,
        &body,
        config.resolve.cache_ttl_seconds,
        Some(sticky.as_ref()),
    )
    .await
    {
        Ok(explained) => explained,
        Err(e) => {
            errln!("flowgate: {}", e.detail);
            for field in &e.errors {
                errln!("  {}: {}", field.field, field.message);
            }
            return if e.code == "app_not_found" {
                ExitCode::NotFound
            } else {
                ExitCode::InvalidInput
            };
        }
    };
    if json {
        crate::terminal::json(&String::from_utf8_lossy(&explained.to_json()));
        return ExitCode::Success;
    }
    outln!("catalog revision {revision}");
    outln!("result: {}", String::from_utf8_lossy(explained.result()));
    if explained.trace().is_empty() {
        outln!("trace: the app has no placement `{placement}`");
    }
    for step in explained.trace() {
        outln!("{step}");
    }
    outln!("reason: {}", explained.reason());
    ExitCode::Success
}
