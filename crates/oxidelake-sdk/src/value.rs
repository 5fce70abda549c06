//! Typed INSERT parameters.

use std::path::{Path, PathBuf};

/// A local file to upload as a managed object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileUpload {
    path: PathBuf,
    mime: Option<String>,
}

impl FileUpload {
    /// The file at `path`; its MIME type is sniffed from content and extension.
    pub fn from_path(path: impl AsRef<Path>) -> Self {
        Self {
            path: path.as_ref().to_path_buf(),
            mime: None,
        }
    }

    /// Overrides the sniffed MIME type.
    pub fn with_mime(mut self, mime: impl Into<String>) -> Self {
        self.mime = Some(mime.into());
        self
    }

    /// The local path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The MIME override, if any.
    pub fn mime(&self) -> Option<&str> {
        self.mime.as_deref()
    }
}

/// One `?` parameter of an INSERT.
#[derive(Debug, Clone, PartialEq)]
pub enum InsertValue {
    /// BIGINT.
    Int64(i64),
    /// DOUBLE.
    Float64(f64),
    /// VARCHAR.
    Utf8(String),
    /// BOOLEAN.
    Bool(bool),
    /// NULL (the column must be nullable).
    Null,
    /// A file to upload into a FILE (DataLocation) column.
    File(FileUpload),
}

impl InsertValue {
    /// The parameter's kind, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            InsertValue::Int64(_) => "Int64",
            InsertValue::Float64(_) => "Float64",
            InsertValue::Utf8(_) => "Utf8",
            InsertValue::Bool(_) => "Bool",
            InsertValue::Null => "NULL",
            InsertValue::File(_) => "File",
        }
    }
}
