//! gRPC status names, as Istio's fault injection takes them (`grpcStatus: UNAVAILABLE`).

/// The canonical status names, indexed by their code.
pub const NAMES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

/// The code of a status given by name (`UNAVAILABLE`) or by number (`14`).
pub fn code(name: &str) -> Option<u32> {
    NAMES
        .iter()
        .position(|n| *n == name)
        .and_then(|i| u32::try_from(i).ok())
        .or_else(|| name.parse().ok())
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_and_numbers_give_codes() {
        assert_eq!(super::code("UNAVAILABLE"), Some(14));
        assert_eq!(super::code("14"), Some(14));
        assert_eq!(super::code("unavailable"), None);
    }
}
