//! Config enrichment: derived fields computed once per config record (STG-03, CFG-13).

use futures::future::BoxFuture;

use crate::error::BoxError;
use crate::record::Config;

/// Derives something once per config record on its way into the store.
///
/// A stage enriches its configs exactly when its `config_enricher` hook returns one, so the
/// choice is declared in one place: a stage without an enricher stores configs as their
/// canonical wire bytes, undecoded, which is what keeps a large bootstrap cheap; a stage with
/// one has every surviving config decoded, enriched and re-encoded, in every build.
///
/// Enrichment runs for every surviving record at every boot, and for every later update, so it
/// must be deterministic: a restarted instance rebuilds its store through it (CFG-13).
/// Closures `Fn(Config) -> Result<Config, BoxError>` are enrichers.
///
/// ```
/// use flechtwerk::attribute::{Attribute, STR};
/// use flechtwerk::stage::{BoxError, EnrichConfig};
/// use flechtwerk::Config;
///
/// const HOST: Attribute<String> = Attribute::new("host", &STR);
/// const URL: Attribute<String> = Attribute::new("url", &STR);
///
/// let add_url = |config: Config| -> Result<Config, BoxError> {
///     let host = config.get(&HOST)?.unwrap_or_default();
///     Ok(config.with(&URL, format!("https://{host}/api"))?)
/// };
/// let enriched = futures::executor::block_on(add_url.enrich_config(Config::new().with(&HOST, "a.example".to_owned())?))?;
/// assert_eq!(enriched.get(&URL)?.as_deref(), Some("https://a.example/api"));
/// # Ok::<(), BoxError>(())
/// ```
pub trait EnrichConfig: Send + Sync {
    /// The enriched config (the store keeps what this returns).
    ///
    /// ```
    /// use flechtwerk::attribute::{Attribute, INT};
    /// use flechtwerk::stage::{BoxError, EnrichConfig};
    /// use flechtwerk::Config;
    /// const LIMIT: Attribute<i64> = Attribute::new("limit", &INT);
    /// const DOUBLED: Attribute<i64> = Attribute::new("doubled", &INT);
    /// // A deterministic derivation: the store keeps the result.
    /// let double = |config: Config| -> Result<Config, BoxError> {
    ///     let limit = config.require(&LIMIT)?;
    ///     Ok(config.with(&DOUBLED, limit * 2)?)
    /// };
    /// let enriched = futures::executor::block_on(double.enrich_config(Config::new().with(&LIMIT, 5)?))?;
    /// assert_eq!(enriched.require(&DOUBLED)?, 10);
    /// # Ok::<(), BoxError>(())
    /// ```
    fn enrich_config(&self, config: Config) -> BoxFuture<'_, Result<Config, BoxError>>;
}

impl<F> EnrichConfig for F
where
    F: Fn(Config) -> Result<Config, BoxError> + Send + Sync,
{
    fn enrich_config(&self, config: Config) -> BoxFuture<'_, Result<Config, BoxError>> {
        let result = self(config);
        Box::pin(async move { result })
    }
}
