//! The lake the managed-object tests share: the `robots.episodes` table, its INSERT and
//! deterministic payloads. Included by the SDK's tests and by the `oxide` command-line
//! tests of `oxidelake-cli` (`#[path]`), which run the same scenarios through the binary.

use std::path::Path;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema};
use oxidelake_objects::data_location_field;
use oxidelake_sdk::LakeClient;

pub const INSERT: &str = "INSERT INTO robots.episodes (id, episode) VALUES (?, ?)";

pub async fn client_with_table(dir: &Path) -> LakeClient {
    let client = LakeClient::open(dir).unwrap();
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("note", DataType::Utf8, true),
        data_location_field("episode"),
    ]));
    client
        .create_table("robots.episodes", schema)
        .await
        .unwrap();
    client
}

pub fn bytes(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}
