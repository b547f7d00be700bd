//! Retrying transport calls ([`shoal_infra::retry`]), each retry counted in
//! `shoal_ingest_transport_retries_total{op}`.

use crate::metrics::{Metrics, OpLabel};
use shoal_proto::transport::TransportError;
use std::future::Future;

pub use shoal_infra::retry::RetryConfig;

/// [`shoal_infra::retry::retry`], counting retries under `op` in `metrics`.
pub(crate) async fn retry<T, F, Fut>(
    op: &'static str,
    config: RetryConfig,
    metrics: &Metrics,
    call: F,
) -> Result<T, TransportError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, TransportError>>,
{
    let on_retry = || {
        metrics.retries.get_or_create(&OpLabel { op }).inc();
    };
    shoal_infra::retry::retry(op, config, on_retry, call).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[tokio::test(start_paused = true)]
    async fn counts_each_retry_under_its_op() {
        let metrics = Metrics::unregistered();
        let calls = AtomicU32::new(0);
        let out = retry("put", RetryConfig::default(), &metrics, || async {
            match calls.fetch_add(1, Ordering::SeqCst) {
                0 | 1 => Err(TransportError::Unavailable("kv", "down".into())),
                _ => Ok(7),
            }
        })
        .await;
        assert_eq!(out.unwrap(), 7);
        assert_eq!(
            metrics.retries.get_or_create(&OpLabel { op: "put" }).get(),
            2
        );
    }
}
