//! The lake the managed-object tests share: the `robots.episodes` table, its INSERT and
//! deterministic payloads. Included by the SDK's tests and by the `oxide` command-line
//! tests of `oxidelake-cli` (`#[path]`), which run the same scenarios through the binary.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use arrow::datatypes::{DataType, Field, Schema};
use oxidelake_objects::{GcPolicy, data_location_field};
use oxidelake_sdk::{FileUpload, InsertValue, LakeClient};

/// The one-row INSERT of `robots.episodes`: an id and an episode file.
pub const INSERT: &str = "INSERT INTO robots.episodes (id, episode) VALUES (?, ?)";

/// A client on a new lake in `dir` with the table `robots.episodes` (id int64 NOT
/// NULL, note utf8, episode file).
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

/// `len` deterministic bytes; different seeds give different contents.
pub fn bytes(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// A client with one committed row whose episode is a 20 kB file; returns the client,
/// the row's object digest and the object's bytes.
pub async fn one_row(data: &Path) -> (LakeClient, oxidelake_objects::DataLocation, Vec<u8>) {
    let client = client_with_table(data).await;
    let payload = bytes(20_000, 7);
    let file = data.with_extension("payload.bin");
    std::fs::write(&file, &payload).unwrap();
    let outcome = client
        .execute(
            INSERT,
            vec![
                InsertValue::Int64(1),
                InsertValue::File(FileUpload::from_path(&file)),
            ],
        )
        .await
        .unwrap();
    (client, outcome.locations[0].clone(), payload)
}

/// Everything older than the window, as if a day had passed.
pub fn age_all_objects(client: &LakeClient) {
    fn walk(dir: &Path) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path);
            } else {
                std::fs::File::open(&path)
                    .unwrap()
                    .set_modified(std::time::SystemTime::now() - Duration::from_secs(86_400 * 2))
                    .unwrap();
            }
        }
    }
    walk(&client.objects().root().join("sha256"));
}

/// A collection policy that deletes every orphan, however young.
pub fn forced_zero() -> GcPolicy {
    GcPolicy::new(Duration::ZERO).allow_below_floor()
}
