//! The CA's metrics, under Istio's names (`security/pkg/server/ca/monitoring.go`) so
//! that dashboards built for istiod read them. prometheus-client appends `_total` to
//! counters in the exposition (`citadel_server_csr_count_total`).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ErrorLabel {
    /// Istio's error type: CA_NOT_READY, CSR_ERROR, TTL_ERROR, CERT_GEN_ERROR.
    pub error: &'static str,
}

#[derive(Clone, Default)]
pub(crate) struct CaMetrics {
    pub csr: Counter,
    pub authentication_failure: Counter,
    pub csr_parsing_err: Counter,
    pub id_extraction_err: Counter,
    pub csr_sign_err: Family<ErrorLabel, Counter>,
    pub success_cert_issuance: Counter,
    pub cert_chain_expiry_timestamp: Gauge,
}

impl CaMetrics {
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let m = CaMetrics::default();
        registry.register(
            "citadel_server_csr_count",
            "The number of CSRs received by the CA",
            m.csr.clone(),
        );
        registry.register(
            "citadel_server_authentication_failure_count",
            "The number of CSRs refused because the caller was not authenticated",
            m.authentication_failure.clone(),
        );
        registry.register(
            "citadel_server_csr_parsing_err_count",
            "The number of CSRs that could not be parsed or whose signature did not verify",
            m.csr_parsing_err.clone(),
        );
        registry.register(
            "citadel_server_id_extraction_err_count",
            "The number of CSRs whose caller had no workload identity to sign for",
            m.id_extraction_err.clone(),
        );
        registry.register(
            "citadel_server_csr_sign_err_count",
            "The number of CSRs refused or failed while signing, by Istio's error type",
            m.csr_sign_err.clone(),
        );
        registry.register(
            "citadel_server_success_cert_issuance_count",
            "The number of certificates issued",
            m.success_cert_issuance.clone(),
        );
        registry.register(
            "citadel_server_cert_chain_expiry_timestamp",
            "The unix time at which the CA's issuing certificate expires",
            m.cert_chain_expiry_timestamp.clone(),
        );
        m
    }
}
