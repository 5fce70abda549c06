//! MIME types of uploaded files: from the content's magic bytes, then the extension.

use std::path::Path;

/// Magic-byte prefixes of formats robotics and ML data commonly arrive in.
const MAGIC: &[(&[u8], &str)] = &[
    (b"\x89MCAP0\r\n", "application/x-mcap"),
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xFF\xD8\xFF", "image/jpeg"),
    (b"PAR1", "application/vnd.apache.parquet"),
    (b"ARROW1", "application/vnd.apache.arrow.file"),
    (b"%PDF-", "application/pdf"),
    (b"PK\x03\x04", "application/zip"),
    (b"\x1F\x8B", "application/gzip"),
    (b"\x93NUMPY", "application/x-npy"),
    (b"#ROSBAG", "application/x-rosbag"),
];

fn by_extension(path: &Path) -> Option<&'static str> {
    let ext = path.extension()?.to_str()?.to_ascii_lowercase();
    Some(match ext.as_str() {
        "mcap" => "application/x-mcap",
        "bag" => "application/x-rosbag",
        "mp4" => "video/mp4",
        "mkv" => "video/x-matroska",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "parquet" => "application/vnd.apache.parquet",
        "arrow" | "feather" => "application/vnd.apache.arrow.file",
        "pcd" => "application/x-pcd",
        "ply" => "application/x-ply",
        "las" => "application/vnd.las",
        "npy" => "application/x-npy",
        "safetensors" => "application/x-safetensors",
        "pt" | "pth" | "ckpt" => "application/x-pytorch",
        "json" => "application/json",
        "csv" => "text/csv",
        "txt" => "text/plain",
        "pdf" => "application/pdf",
        "zip" => "application/zip",
        "gz" => "application/gzip",
        _ => return None,
    })
}

/// The MIME type of a file whose content starts with `head`.
pub fn sniff_mime(path: &Path, head: &[u8]) -> &'static str {
    if head.len() >= 8 && &head[4..8] == b"ftyp" {
        return "video/mp4";
    }
    MAGIC
        .iter()
        .find(|(magic, _)| head.starts_with(magic))
        .map(|(_, mime)| *mime)
        .or_else(|| by_extension(path))
        .unwrap_or("application/octet-stream")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_wins_over_the_extension_and_unknowns_are_octet_streams() {
        assert_eq!(
            sniff_mime(Path::new("a.bin"), b"\x89MCAP0\r\nxxxx"),
            "application/x-mcap"
        );
        assert_eq!(
            sniff_mime(Path::new("a.mcap"), b"PAR1...."),
            "application/vnd.apache.parquet"
        );
        assert_eq!(
            sniff_mime(Path::new("clip.MP4"), b"\0\0\0\x18ftypmp42"),
            "video/mp4"
        );
        assert_eq!(
            sniff_mime(Path::new("cloud.pcd"), b"# .PCD v0.7"),
            "application/x-pcd"
        );
        assert_eq!(
            sniff_mime(Path::new("blob"), b"\x00\x01"),
            "application/octet-stream"
        );
    }
}
