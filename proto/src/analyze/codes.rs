//! The message codes `shoal analyze` reports: Istio's (`IST…`, from istio/istio
//! `pkg/config/analysis/msg/messages.yaml`, same meaning and default level) where Istio has
//! one, Shoal's own (`SHL…`) for what only Shoal reports.
//!
//! | Code    | Name                                       | Level   |
//! |---------|--------------------------------------------|---------|
//! | IST0101 | ReferencedResourceNotFound                 | Error   |
//! | IST0106 | SchemaValidationError                      | Error   |
//! | IST0109 | ConflictingMeshGatewayVirtualServiceHosts  | Error   |
//! | IST0110 | ConflictingSidecarWorkloadSelectors        | Error   |
//! | IST0111 | MultipleSidecarsWithoutWorkloadSelectors   | Error   |
//! | IST0132 | VirtualServiceHostNotFoundInGateway        | Warning |
//! | IST0133 | SchemaWarning                              | Warning |
//! | IST0145 | ConflictingGateways                        | Error   |
//! | IST0173 | DestinationRuleSubsetNotSelectPods         | Error   |
//! | IST0174 | UnknownDestinationRuleHost                 | Warning |
//! | SHL0001 | UnsupportedKind                            | Warning; Error for the security.istio.io kinds that deny requests |
//! | SHL0002 | UnsupportedField                           | Warning |

use super::Level;

/// A message code, its name and default level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Code {
    pub id: &'static str,
    pub name: &'static str,
    pub level: Level,
}

const fn code(id: &'static str, name: &'static str, level: Level) -> Code {
    Code { id, name, level }
}

pub const REFERENCED_RESOURCE_NOT_FOUND: Code =
    code("IST0101", "ReferencedResourceNotFound", Level::Error);
pub const SCHEMA_VALIDATION_ERROR: Code = code("IST0106", "SchemaValidationError", Level::Error);
pub const CONFLICTING_MESH_GATEWAY_VIRTUAL_SERVICE_HOSTS: Code = code(
    "IST0109",
    "ConflictingMeshGatewayVirtualServiceHosts",
    Level::Error,
);
pub const CONFLICTING_SIDECAR_WORKLOAD_SELECTORS: Code = code(
    "IST0110",
    "ConflictingSidecarWorkloadSelectors",
    Level::Error,
);
pub const MULTIPLE_SIDECARS_WITHOUT_WORKLOAD_SELECTORS: Code = code(
    "IST0111",
    "MultipleSidecarsWithoutWorkloadSelectors",
    Level::Error,
);
pub const VIRTUAL_SERVICE_HOST_NOT_FOUND_IN_GATEWAY: Code = code(
    "IST0132",
    "VirtualServiceHostNotFoundInGateway",
    Level::Warning,
);
pub const NO_MATCHING_WORKLOADS_FOUND: Code =
    code("IST0127", "NoMatchingWorkloadsFound", Level::Warning);
pub const SCHEMA_WARNING: Code = code("IST0133", "SchemaWarning", Level::Warning);
pub const CONFLICTING_GATEWAYS: Code = code("IST0145", "ConflictingGateways", Level::Error);
pub const DESTINATION_RULE_SUBSET_NOT_SELECT_PODS: Code = code(
    "IST0173",
    "DestinationRuleSubsetNotSelectPods",
    Level::Error,
);
pub const UNKNOWN_DESTINATION_RULE_HOST: Code =
    code("IST0174", "UnknownDestinationRuleHost", Level::Warning);
/// An Istio or Gateway API kind Shoal does not implement: nothing is served for it.
pub const UNSUPPORTED_KIND: Code = code("SHL0001", "UnsupportedKind", Level::Warning);
/// Spec fields of a kind Shoal reads that it does not implement: they are ignored.
pub const UNSUPPORTED_FIELD: Code = code("SHL0002", "UnsupportedField", Level::Warning);

/// Every code, for documentation and `--help`.
pub const ALL: [Code; 13] = [
    REFERENCED_RESOURCE_NOT_FOUND,
    SCHEMA_VALIDATION_ERROR,
    CONFLICTING_MESH_GATEWAY_VIRTUAL_SERVICE_HOSTS,
    CONFLICTING_SIDECAR_WORKLOAD_SELECTORS,
    MULTIPLE_SIDECARS_WITHOUT_WORKLOAD_SELECTORS,
    VIRTUAL_SERVICE_HOST_NOT_FOUND_IN_GATEWAY,
    NO_MATCHING_WORKLOADS_FOUND,
    SCHEMA_WARNING,
    CONFLICTING_GATEWAYS,
    DESTINATION_RULE_SUBSET_NOT_SELECT_PODS,
    UNKNOWN_DESTINATION_RULE_HOST,
    UNSUPPORTED_KIND,
    UNSUPPORTED_FIELD,
];
