//! # oxidelake-objects
//!
//! Managed large objects: the immutable [`DataLocation`] {uri, mime, size, sha256} a
//! table row points at, its Arrow struct type, the streaming [`ManagedObjectStore`]
//! under `<data-dir>/objects` that hashes while it copies and publishes only complete
//! objects, verified readers that refuse locations outside the store and detect
//! tampering, and garbage collection of orphaned uploads that never deletes an object a
//! committed row or an in-flight INSERT uses (pins, a store lock, a retention floor).
//!
//! **Allowed internal dependencies:** `oxidelake-core` only (AMENDMENTS A4).
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod digest;
mod error;
mod gc;
mod location;
mod lock;
mod mime;
mod pin;
mod reader;
mod regular_file;
mod store;
mod unique;

pub use digest::Sha256Digest;
pub use error::ObjectError;
pub use gc::{GcPolicy, GcReport, GcRun, MAX_RETENTION, MIN_RETENTION, parse_retention_hours};
pub use location::{
    DataLocation, data_location_field, data_location_fields, data_location_type, from_array,
    is_data_location, to_array,
};
pub use mime::sniff_mime;
pub use pin::ObjectPin;
pub use reader::{VerifiedReader, verification_error};
pub use store::{DEFAULT_CHUNK_BYTES, ManagedObjectStore, Published, RELATIVE_PREFIX};
