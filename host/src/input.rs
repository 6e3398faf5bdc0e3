//! Reading objects and configuration from YAML or JSON files. Every error names the file
//! and says what the file must hold.
//!
//! Every YAML the host reads from people (`host.yaml`, the files of `wasmloop reconcile`, a
//! plugin's configuration in a ConfigMap or given to `bundle`) goes through `serde-saphyr`
//! with [`yaml_options`], which reads as `serde_yaml` 0.9 did, so a file means what it meant
//! before. Recorded cases, which only the host writes, are read within the parser's default
//! budget ([`case_yaml_options`]), so an alias bomb in one is refused.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// The largest plugin component taken from anywhere: a file, a ConfigMap's component once
/// decompressed, an OCI layer. Anything larger is a gzip bomb or a mistake, not a plugin.
pub const MAX_COMPONENT: u64 = 64 * 1024 * 1024;

/// Why a file given to the host cannot be used: each names the file, and what it must hold.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// A file of objects or configuration that cannot be read.
    #[error("cannot read {}; check the path and its permissions", .path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// What the read said.
        #[source]
        source: std::io::Error,
    },
    /// A bounded file that cannot be read.
    #[error("cannot read {}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What the read said.
        #[source]
        source: std::io::Error,
    },
    /// A device, a pipe or a directory: no size to bound.
    #[error("{} is not a regular file; pass {what}", .path.display())]
    NotAFile {
        /// The path.
        path: PathBuf,
        /// What it should hold.
        what: String,
    },
    /// A file past its bound.
    #[error("{} is larger than {limit} bytes, too large for {what}", .path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The bound, in bytes.
        limit: u64,
        /// What it should hold.
        what: String,
    },
    /// Text that is not UTF-8.
    #[error("{} is not UTF-8 text; pass {what}", .path.display())]
    NotUtf8 {
        /// The file.
        path: PathBuf,
        /// What it should hold.
        what: String,
    },
    /// A document that is not YAML (nor JSON).
    #[error(
        "cannot parse {} (document {document}) as YAML or JSON: {message}; fix the syntax at that position",
        .path.display()
    )]
    Syntax {
        /// The file.
        path: PathBuf,
        /// The document's number, from 1, counting those that hold something.
        document: usize,
        /// The parser's words, in the author's terms ([`yaml_error`]).
        message: String,
    },
    /// An object without one of the fields every object has.
    #[error(
        "{} holds an object without {field}; every Kubernetes object needs apiVersion, kind and metadata.name",
        .path.display()
    )]
    NotAnObject {
        /// The file.
        path: PathBuf,
        /// The field missing.
        field: &'static str,
    },
    /// No object where one is needed.
    #[error("{} holds no object; put the primary object in it", .path.display())]
    NoObject {
        /// The file.
        path: PathBuf,
    },
    /// Several objects where one is needed.
    #[error(
        "{} holds {count} objects, but --object takes exactly one; pass the others with --owned or --cache",
        .path.display()
    )]
    SeveralObjects {
        /// The file.
        path: PathBuf,
        /// How many it holds.
        count: usize,
    },
    /// A configuration of several documents.
    #[error("{} holds {count} YAML documents; a plugin config is one mapping", .path.display())]
    SeveralDocuments {
        /// The file.
        path: PathBuf,
        /// How many it holds.
        count: usize,
    },
}

fn read_text(path: &Path) -> Result<String, InputError> {
    std::fs::read_to_string(path).map_err(|source| InputError::Unreadable { path: path.to_owned(), source })
}

/// How wasmloop reads YAML (JSON is YAML too), everywhere: as `serde_yaml` 0.9 did, so a file
/// means what it meant before. Only `true` and `false` are booleans (`yes`, `no`, `on`, `off`,
/// `y` and `n` stay strings), and `0755` and `1_000` stay strings. No document, node or size
/// budget applies beyond the parser's nesting limit (a `--cache` file may hold thousands of
/// objects); alias expansion stays capped. Two differences remain: a mapping with a duplicate
/// key is refused (`serde_yaml` kept the last one in untyped values), and `<<` merge keys are
/// applied (`serde_yaml` kept `<<` as an ordinary key).
pub fn yaml_options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        budget: None,
        strict_booleans: true,
        leading_zero_numbers_as_strings: true,
        underscored_numbers_as_strings: true,
    }
}

/// The text of `path`, which must be a regular file of at most `limit` bytes: a device or a
/// pipe reports no size to check, so it is refused, and the read itself stops past `limit`.
/// `what` says what the file should hold, for the error.
///
/// # Errors
/// An [`InputError`]: a file that cannot be read, is no regular file, is too large or is not
/// UTF-8, named with what it should be.
pub fn read_bounded(path: &Path, limit: u64, what: &str) -> Result<String, InputError> {
    let bytes = read_bytes_bounded(path, limit, what)?;
    String::from_utf8(bytes).map_err(|_| InputError::NotUtf8 { path: path.to_owned(), what: what.to_owned() })
}

/// The bytes of `path`, bounded as [`read_bounded`] bounds text.
///
/// # Errors
/// An [`InputError`], as [`read_bounded`], UTF-8 aside.
pub fn read_bytes_bounded(path: &Path, limit: u64, what: &str) -> Result<Vec<u8>, InputError> {
    use std::io::Read as _;
    let cannot = |source| InputError::Read { path: path.to_owned(), source };
    let meta = std::fs::metadata(path).map_err(cannot)?;
    if !meta.is_file() {
        return Err(InputError::NotAFile { path: path.to_owned(), what: what.to_owned() });
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path).map_err(cannot)?.take(limit + 1).read_to_end(&mut bytes).map_err(cannot)?;
    if bytes.len() as u64 > limit {
        return Err(InputError::TooLarge { path: path.to_owned(), limit, what: what.to_owned() });
    }
    Ok(bytes)
}

/// [`yaml_options`] with the parser's default budget: for files only the host writes (recorded
/// cases), which hold no anchors, so an alias bomb in one is refused rather than expanded.
pub fn case_yaml_options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        strict_booleans: true,
        leading_zero_numbers_as_strings: true,
        underscored_numbers_as_strings: true,
    }
}

/// A YAML error in its author's terms: what and where, without the source snippet, and
/// without the parser's advice, which is for programmers embedding it.
pub fn yaml_error(e: &serde_saphyr::Error) -> String {
    e.without_snippet().to_string().replace(", set DuplicateKeyPolicy in Options if acceptable", "")
}

fn documents(path: &Path, text: &str) -> Result<Vec<Value>, InputError> {
    let mut out = Vec::new();
    let mut reader = text.as_bytes();
    // The reader skips empty and null documents: a document's number counts those that hold
    // something. After an error it stops (syntax) or would move on (type); either way, the
    // first error is the one reported.
    let documents = serde_saphyr::read_with_options::<_, Value>(&mut reader, yaml_options());
    for (index, document) in documents.enumerate() {
        let value = document.map_err(|e| InputError::Syntax {
            path: path.to_owned(),
            document: index + 1,
            message: yaml_error(&e),
        })?;
        if !value.is_null() {
            out.push(value);
        }
    }
    Ok(out)
}

fn check_object(path: &Path, value: &Value) -> Result<(), InputError> {
    let has = |p: &str| value.pointer(p).and_then(Value::as_str).is_some_and(|s| !s.is_empty());
    for (pointer, field) in [("/apiVersion", "apiVersion"), ("/kind", "kind"), ("/metadata/name", "metadata.name")] {
        if !has(pointer) {
            return Err(InputError::NotAnObject { path: path.to_owned(), field });
        }
    }
    Ok(())
}

/// Reads every object in a file: several `---` documents, and the items of `kind: List`.
///
/// # Errors
/// An [`InputError`]: the file cannot be read, does not parse, or holds something that is not
/// an object.
pub fn read_objects(path: &Path) -> Result<Vec<Value>, InputError> {
    let text = read_text(path)?;
    let mut objects = Vec::new();
    for document in documents(path, &text)? {
        let is_list = document.get("kind").and_then(Value::as_str).is_some_and(|k| k.ends_with("List"));
        match document.get("items").and_then(Value::as_array) {
            Some(items) if is_list => objects.extend(items.iter().cloned()),
            _ => objects.push(document),
        }
    }
    for object in &objects {
        check_object(path, object)?;
    }
    Ok(objects)
}

/// Reads the one object a file must hold.
///
/// # Errors
/// An [`InputError`]: the file holds no object or several, or [`read_objects`] fails.
pub fn read_object(path: &Path) -> Result<Value, InputError> {
    let mut objects = read_objects(path)?;
    match objects.len() {
        1 => Ok(objects.remove(0)),
        0 => Err(InputError::NoObject { path: path.to_owned() }),
        count => Err(InputError::SeveralObjects { path: path.to_owned(), count }),
    }
}

/// Reads a plugin configuration file (YAML or JSON) and returns it as JSON text.
///
/// # Errors
/// An [`InputError`]: the file cannot be read or parsed, or holds several documents.
pub fn read_config(path: &Path) -> Result<String, InputError> {
    let text = read_text(path)?;
    let mut docs = documents(path, &text)?;
    match docs.len() {
        0 => Ok("{}".into()),
        1 => Ok(docs.remove(0).to_string()),
        count => Err(InputError::SeveralDocuments { path: path.to_owned(), count }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duplicate_key_is_refused_naming_its_line_in_the_authors_terms() {
        let text = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  name: b\n";
        let error = documents(Path::new("dup.yaml"), text).unwrap_err().to_string();
        assert!(error.contains("dup.yaml (document 1)") && error.contains("duplicate mapping key: name"), "{error}");
        assert!(error.contains("line 5"), "{error}");
        assert!(!error.contains("DuplicateKeyPolicy"), "advice for programmers leaks: {error}");
    }

    #[test]
    fn a_bounded_read_refuses_devices_and_files_past_the_limit() {
        let error = read_bounded(Path::new("/dev/zero"), 16, "keys").unwrap_err().to_string();
        assert!(error.contains("not a regular file; pass keys"), "{error}");
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), "x".repeat(17)).unwrap();
        assert!(read_bounded(file.path(), 16, "keys").unwrap_err().to_string().contains("larger than 16 bytes"));
        assert_eq!(read_bounded(file.path(), 17, "keys").unwrap().len(), 17);
    }

    #[test]
    fn a_failed_read_names_the_file_and_leaves_the_cause_to_the_chain_once() {
        let error = read_bounded(Path::new("/nonexistent/keys"), 16, "keys").unwrap_err();
        assert_eq!(error.to_string(), "cannot read /nonexistent/keys");
        // As the binary prints it: the cause follows once, not twice.
        let printed = format!("{:#}", anyhow::Error::from(error));
        assert!(printed.starts_with("cannot read /nonexistent/keys: ") && printed.matches("os error").count() == 1);
    }

    #[test]
    fn a_merge_key_is_applied() {
        let text = "base: &base {app: web}\nlabels:\n  <<: *base\n  tier: api\n";
        let value = &documents(Path::new("merge.yaml"), text).unwrap()[0];
        assert_eq!(value["labels"], serde_json::json!({"app": "web", "tier": "api"}));
    }
}
