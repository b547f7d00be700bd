//! Istio `HTTPFaultInjection` → the per-route config of Envoy's fault filter
//! (Istio's `translateFault`).

use crate::xds::util::{fractional_percent, parse_duration};
use envoy_types::pb::envoy::extensions::filters::common::fault::v3::{FaultDelay, fault_delay};
use envoy_types::pb::envoy::extensions::filters::http::fault::v3::{
    FaultAbort, HttpFault, fault_abort,
};
use shoal_proto::config::grpc_status;
use shoal_proto::config::istio::{self, HttpFaultInjection, Percent};

/// The HTTP filter that applies it (in every outbound HTTP connection manager).
pub const FAULT_FILTER: &str = "envoy.filters.http.fault";

/// The percentage a fault applies to: `percentage`, else the deprecated integer
/// `percent`, else all requests.
fn share(percentage: Option<Percent>, percent: Option<u32>) -> f64 {
    percentage
        .map(|p| p.value)
        .or(percent.map(f64::from))
        .unwrap_or(100.0)
}

pub fn http_fault(fault: &HttpFaultInjection) -> HttpFault {
    let delay = fault.delay.as_ref().map(|d| FaultDelay {
        percentage: Some(fractional_percent(share(d.percentage, d.percent))),
        fault_delay_secifier: parse_duration(d.fixed_delay.as_deref())
            .map(fault_delay::FaultDelaySecifier::FixedDelay),
    });
    let abort = fault.abort.as_ref().map(|a| FaultAbort {
        percentage: Some(fractional_percent(share(a.percentage, None))),
        error_type: abort_error(a),
        ..Default::default()
    });
    HttpFault {
        delay,
        abort,
        ..Default::default()
    }
}

fn abort_error(a: &istio::FaultAbort) -> Option<fault_abort::ErrorType> {
    if let Some(status) = a.http_status {
        return Some(fault_abort::ErrorType::HttpStatus(status));
    }
    let code = grpc_status::code(a.grpc_status.as_deref()?)?;
    Some(fault_abort::ErrorType::GrpcStatus(code))
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::r#type::v3::fractional_percent::DenominatorType;

    #[test]
    fn delay_and_abort_with_percentages() {
        let fault = HttpFaultInjection {
            delay: Some(istio::FaultDelay {
                fixed_delay: Some("1.5s".into()),
                percent: Some(30),
                ..Default::default()
            }),
            abort: Some(istio::FaultAbort {
                grpc_status: Some("UNAVAILABLE".into()),
                percentage: Some(Percent { value: 0.5 }),
                ..Default::default()
            }),
        };
        let f = http_fault(&fault);
        let delay = f.delay.unwrap();
        assert_eq!(delay.percentage.unwrap().numerator, 300_000);
        assert_eq!(
            delay.percentage.unwrap().denominator,
            DenominatorType::Million as i32
        );
        let Some(fault_delay::FaultDelaySecifier::FixedDelay(d)) = delay.fault_delay_secifier
        else {
            panic!("fixed delay");
        };
        assert_eq!((d.seconds, d.nanos), (1, 500_000_000));
        let abort = f.abort.unwrap();
        assert_eq!(
            abort.error_type,
            Some(fault_abort::ErrorType::GrpcStatus(14))
        );
        assert_eq!(abort.percentage.unwrap().numerator, 5_000);
    }
}
