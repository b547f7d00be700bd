//! The file system side of the registry: finding config files and reading them.
//!
//! Config files are `*.yaml` / `*.yml` anywhere under the root. Hidden entries (`.git`,
//! editors' `.swp` files, Kubernetes ConfigMap mounts' `..data` and timestamped
//! directories) are never read; a change to one rescans the directory holding it, which
//! is how a ConfigMap's atomic `..data` swap is seen through its visible symlinks (such a
//! rescan reads only the files whose stamp moved: `stamps`).

use super::index::FileRead;
use shoal_proto::config::parse::{
    Ignored, NodeLabels, ParseError, Parsed, parse_documents, parse_ignored, parse_nodes,
};
use std::collections::BTreeSet;
use std::io;
use std::path::{Component, Path, PathBuf};

/// Symlinked directories are followed, to this depth (a cycle ends here).
const MAX_DEPTH: usize = 32;

fn is_hidden(name: &std::ffi::OsStr) -> bool {
    name.to_string_lossy().starts_with('.')
}

/// A `*.yaml` / `*.yml` file name that is not hidden.
pub(crate) fn is_config_file(path: &Path) -> bool {
    let Some(name) = path.file_name() else {
        return false;
    };
    if is_hidden(name) {
        return false;
    }
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("yaml") || e.eq_ignore_ascii_case("yml"))
}

/// Every config file under `dir`, sorted.
pub(crate) fn scan(dir: &Path) -> io::Result<BTreeSet<PathBuf>> {
    let mut out = BTreeSet::new();
    walk(dir, 0, &mut out)?;
    Ok(out)
}

fn walk(dir: &Path, depth: usize, out: &mut BTreeSet<PathBuf>) -> io::Result<()> {
    if depth > MAX_DEPTH {
        tracing::warn!(dir = %dir.display(), "directory nesting too deep; not descending");
        return Ok(());
    }
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        if is_hidden(&entry.file_name()) {
            continue;
        }
        // Follows symlinks: a link to a file or directory counts as what it points to.
        match std::fs::metadata(&path) {
            Ok(meta) if meta.is_dir() => {
                if let Err(e) = walk(&path, depth + 1, out) {
                    tracing::warn!(dir = %path.display(), "cannot read directory: {e}");
                }
            }
            Ok(meta) if meta.is_file() && is_config_file(&path) => {
                out.insert(path);
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {} // raced with a delete, or a dangling link
            Err(e) => tracing::warn!(path = %path.display(), "cannot stat: {e}"),
        }
    }
    Ok(())
}

/// The directory to rescan for a changed path: a path inside a hidden entry stands for
/// the directory holding that entry. `None` for paths outside `root`.
fn effective_path(root: &Path, path: &Path) -> Option<PathBuf> {
    let rel = path.strip_prefix(root).ok()?;
    let mut out = root.to_path_buf();
    for component in rel.components() {
        match component {
            Component::Normal(name) if is_hidden(name) => return Some(out),
            Component::Normal(name) => out.push(name),
            _ => return None,
        }
    }
    Some(out)
}

/// The files to re-read after changes at `dirty`: config files found under each changed
/// directory, each changed config file, and every known file under a changed path (so a
/// removed file or directory removes what it held).
pub(crate) fn resolve<'a>(
    root: &Path,
    dirty: &BTreeSet<PathBuf>,
    known: impl Iterator<Item = &'a Path> + Clone,
) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    let dirty: BTreeSet<PathBuf> = dirty
        .iter()
        .filter_map(|p| effective_path(root, p))
        .collect();
    for path in &dirty {
        match std::fs::metadata(path) {
            Ok(meta) if meta.is_dir() => match scan(path) {
                Ok(found) => out.extend(found),
                Err(e) => tracing::warn!(dir = %path.display(), "cannot scan: {e}"),
            },
            Ok(_) if is_config_file(path) => {
                out.insert(path.clone());
            }
            _ => {}
        }
        out.extend(
            known
                .clone()
                .filter(|k| k.starts_with(path))
                .map(Path::to_path_buf),
        );
    }
    out
}

/// What a file holds beside its config: Nodes (their labels are Pods' localities) and
/// documents of kinds Shoal does not read.
#[derive(Debug, Default)]
pub(crate) struct Extras {
    pub nodes: Vec<NodeLabels>,
    pub ignored: Vec<Ignored>,
}

/// Reads and parses one file, and what else it holds.
pub(crate) fn read(path: &Path) -> (FileRead, Extras) {
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() && is_config_file(path) => {}
        Ok(_) => return (FileRead::Removed, Extras::default()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return (FileRead::Removed, Extras::default());
        }
        Err(e) => return (FileRead::Unreadable(e.to_string()), Extras::default()),
    }
    let read = match std::fs::read(path) {
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(text) => {
                let source = path.display().to_string();
                let extras = Extras {
                    nodes: parse_nodes(&source, &text),
                    ignored: parse_ignored(&source, &text),
                };
                return (FileRead::Parsed(parse_documents(&source, &text)), extras);
            }
            Err(e) => FileRead::Unreadable(format!("not UTF-8: {e}")),
        },
        Err(e) if e.kind() == io::ErrorKind::NotFound => FileRead::Removed,
        Err(e) => FileRead::Unreadable(e.to_string()),
    };
    (read, Extras::default())
}

/// One config file of a directory, read as the directory registry reads it.
#[derive(Debug)]
pub struct ConfigFile {
    pub path: PathBuf,
    /// Its documents, parsed; `Err` when the file cannot be read (or is not UTF-8).
    pub documents: Result<Vec<Result<Parsed, ParseError>>, String>,
    /// Its documents of kinds Shoal does not read (not mesh config), each named.
    pub ignored: Vec<Ignored>,
}

/// Every config file under `root` (recursively, hidden entries skipped), read and parsed
/// exactly as the directory registry reads them: what `shoal analyze` looks at. An
/// error only when `root` itself cannot be read.
pub fn read_dir(root: &Path) -> io::Result<Vec<ConfigFile>> {
    let files = scan(root)?;
    Ok(files
        .into_iter()
        .filter_map(|path| {
            let (read, extras) = read(&path);
            let documents = match read {
                FileRead::Removed => return None,
                FileRead::Unreadable(reason) => Err(reason),
                FileRead::Parsed(documents) => Ok(documents),
            };
            Some(ConfigFile {
                path,
                documents,
                ignored: extras.ignored,
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn finds_yaml_recursively_skipping_hidden() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(root.join("a/b")).unwrap();
        fs::create_dir_all(root.join(".git")).unwrap();
        for f in [
            "x.yaml",
            "a/y.YML",
            "a/b/z.yml",
            "a/notes.txt",
            ".hidden.yaml",
            ".git/c.yaml",
        ] {
            fs::write(root.join(f), "").unwrap();
        }
        let found: Vec<_> = scan(root)
            .unwrap()
            .into_iter()
            .map(|p| p.strip_prefix(root).unwrap().display().to_string())
            .collect();
        assert_eq!(found, ["a/b/z.yml", "a/y.YML", "x.yaml"]);
    }

    #[test]
    fn resolve_covers_changed_dirs_removed_paths_and_hidden_entries() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(root.join("new")).unwrap();
        fs::write(root.join("new/a.yaml"), "").unwrap();
        fs::write(root.join("top.yaml"), "").unwrap();
        let known = [
            root.join("gone/b.yaml"),
            root.join("gone/c.yaml"),
            root.join("top.yaml"),
        ];
        let known_refs = known.iter().map(PathBuf::as_path);

        let dirty = BTreeSet::from([root.join("new"), root.join("gone")]);
        let got = resolve(root, &dirty, known_refs.clone());
        let want = BTreeSet::from([
            root.join("new/a.yaml"),
            root.join("gone/b.yaml"),
            root.join("gone/c.yaml"),
        ]);
        assert_eq!(got, want);

        // A swap file next to top.yaml rescans its directory (the root).
        let dirty = BTreeSet::from([root.join(".top.yaml.swp")]);
        let got = resolve(root, &dirty, known_refs.clone());
        assert!(got.contains(&root.join("top.yaml")) && got.contains(&root.join("new/a.yaml")));

        // Paths outside the root are ignored.
        let dirty = BTreeSet::from([PathBuf::from("/elsewhere/x.yaml")]);
        assert!(resolve(root, &dirty, known_refs).is_empty());
    }

    #[test]
    fn read_outcomes() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        assert!(matches!(
            read(&root.join("missing.yaml")).0,
            FileRead::Removed
        ));
        fs::write(root.join("bin.yaml"), [0xff, 0xfe, 0x00]).unwrap();
        assert!(matches!(
            read(&root.join("bin.yaml")).0,
            FileRead::Unreadable(_)
        ));
        fs::write(
            root.join("ok.yaml"),
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n",
        )
        .unwrap();
        match read(&root.join("ok.yaml")).0 {
            FileRead::Parsed(docs) => assert_eq!(docs.len(), 1),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn read_dir_reads_every_config_file() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(root.join("sub")).unwrap();
        fs::write(root.join("bin.yaml"), [0xff, 0xfe, 0x00]).unwrap();
        fs::write(
            root.join("sub/ok.yml"),
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n",
        )
        .unwrap();
        let files = read_dir(root).unwrap();
        assert_eq!(files.len(), 2);
        assert!(files[0].path.ends_with("bin.yaml") && files[0].documents.is_err());
        assert_eq!(files[1].documents.as_ref().unwrap().len(), 1);
        assert!(read_dir(&root.join("missing")).is_err());
    }
}
