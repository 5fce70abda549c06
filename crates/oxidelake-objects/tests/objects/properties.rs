//! Property tests of what the store decodes from table rows: the DataLocation struct
//! column and the location URIs it resolves. Arbitrary input never panics; it decodes
//! or is a typed error, and only a location of this store's own object ever opens.

use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, StringArray, StructArray};
use arrow::buffer::NullBuffer;
use oxidelake_objects::{
    DataLocation, ManagedObjectStore, ObjectError, Sha256Digest, data_location_fields, from_array,
    to_array,
};
use proptest::prelude::*;

/// Cases per property in CI (`PROPTEST_CASES` overrides it for longer runs).
const CASES: u32 = 2_000;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(CASES),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Hex-ish text: real digests, near misses and junk.
fn digest_text() -> impl Strategy<Value = String> {
    prop_oneof!["[0-9a-f]{64}", "[0-9a-fA-F]{60,68}", any::<String>(),]
}

fn uri_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "objects/sha256/[0-9a-f]{2}/[0-9a-f]{62}",
        "file:///[a-z/.%]{0,40}objects/sha256/[0-9a-f]{2}/[0-9a-f]{62}",
        "(file|s3|http)://[ -~]{0,60}",
        "[ -~]{0,80}",
        any::<String>(),
    ]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn a_location_column_decodes_or_is_a_typed_error(
        rows in prop::collection::vec(
            (uri_text(), any::<String>(), any::<i64>(), digest_text(), any::<bool>()),
            0..12,
        ),
    ) {
        let uris = StringArray::from_iter_values(rows.iter().map(|r| r.0.as_str()));
        let mimes = StringArray::from_iter_values(rows.iter().map(|r| r.1.as_str()));
        let sizes = Int64Array::from_iter_values(rows.iter().map(|r| r.2));
        let shas = StringArray::from_iter_values(rows.iter().map(|r| r.3.as_str()));
        let nulls = NullBuffer::from_iter(rows.iter().map(|r| r.4));
        let column = StructArray::try_new(
            data_location_fields(),
            vec![
                Arc::new(uris) as ArrayRef,
                Arc::new(mimes),
                Arc::new(sizes),
                Arc::new(shas),
            ],
            Some(nulls),
        )
        .unwrap();
        match from_array(&column) {
            Ok(locations) => {
                prop_assert_eq!(locations.len(), rows.len());
                // What decodes encodes back to the same values.
                let again = from_array(&to_array(&locations).unwrap()).unwrap();
                prop_assert_eq!(again, locations);
            }
            Err(ObjectError::InvalidLocation(_) | ObjectError::InvalidDigest(_)) => {}
            Err(other) => prop_assert!(false, "unexpected error kind {other:?}"),
        }
    }

}

proptest! {
    // Each case creates and fsyncs a store: fewer of them.
    #![proptest_config(ProptestConfig { cases: config().cases / 8, ..config() })]

    #[test]
    fn only_a_location_naming_the_stores_own_object_resolves(
        uri in uri_text(),
        use_real_digest in any::<bool>(),
    ) {
        let data = tempfile::tempdir().unwrap();
        let store = ManagedObjectStore::open(data.path()).unwrap();
        let source = data.path().join("x");
        std::fs::write(&source, b"x").unwrap();
        let real = store.put_file(&source, None).unwrap();
        let digest = if use_real_digest { real.sha256() } else { Sha256Digest::of(b"y") };
        let location = DataLocation::new(uri.clone(), "a/b", 1, digest);
        if let Ok(path) = store.resolve(&location) {
            prop_assert_eq!(path, store.path_of(&real.sha256()).canonicalize().unwrap());
            prop_assert!(uri.ends_with(&ManagedObjectStore::relative_uri(&digest)));
        }
    }
}
