use crate::resource::GroupResource;

/// Why the store refused an operation. The HTTP layer maps each to the apiserver's
/// `Status` reason and code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error("the server could not find the requested resource {0}")]
    UnknownResource(GroupResource),
    #[error("{resource} \"{name}\" not found")]
    NotFound {
        resource: GroupResource,
        name: String,
    },
    #[error("{resource} \"{name}\" already exists")]
    AlreadyExists {
        resource: GroupResource,
        name: String,
    },
    #[error(
        "Operation cannot be fulfilled on {resource} \"{name}\": the object has been modified; \
         please apply your changes to the latest version and try again"
    )]
    Conflict {
        resource: GroupResource,
        name: String,
    },
    #[error("invalid object: {0}")]
    Invalid(String),
    /// A watch asked for changes the history no longer holds. The message is the
    /// apiserver's, which clients may log or match.
    #[error("too old resource version: {requested} ({oldest})")]
    Expired { requested: u64, oldest: u64 },
    #[error(
        "The provided continue parameter is too old to display a consistent list result. \
         You can start a new list without the continue parameter."
    )]
    ContinueExpired,
    #[error("invalid continue token: {0:?}")]
    InvalidContinue(String),
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;
