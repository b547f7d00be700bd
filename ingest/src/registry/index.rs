//! Which file defines which object: the I/O-free core of the directory registry.
//!
//! Each file contributes objects; an object's served version is the one most recently
//! written by any file that defines it (last write wins), and it is deleted only once no
//! file defines it. A re-read that rejects an object keeps that file's earlier version;
//! one whose failure names no object (unreadable YAML, an unreadable file) keeps every
//! object the file had.

use super::rejections::{Rejection, Target};
use super::warnings::Warning;
use shoal_proto::config::parse::{ParseError, Parsed};
use shoal_proto::config::{Config, ConfigKey};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// What reading one file gave.
#[derive(Debug)]
pub(crate) enum FileRead {
    /// The file is gone (or is no longer a config file).
    Removed,
    /// It exists but could not be read: nothing in it can be trusted.
    Unreadable(String),
    /// Its documents, parsed.
    Parsed(Vec<Result<Parsed, ParseError>>),
}

/// What one file update changed.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    /// Keys whose served version may have changed.
    pub touched: BTreeSet<ConfigKey>,
    /// Rejections found by this read (each is logged and counted once).
    pub rejections: Vec<Rejection>,
    /// Accepted objects' warnings found by this read (each is logged once).
    pub warnings: Vec<Warning>,
}

#[derive(Clone, Debug)]
struct Contribution {
    config: Config,
    /// When this file's version of the object last changed (index-wide order).
    written: u64,
}

#[derive(Debug, Default)]
struct FileEntry {
    objects: BTreeMap<ConfigKey, Contribution>,
    rejections: Vec<Rejection>,
    /// The warnings of the objects this file defines.
    warnings: Vec<Warning>,
    /// A failure that names no object: every object the file had is kept.
    unidentified: bool,
}

#[derive(Debug, Default)]
pub(crate) struct Index {
    files: BTreeMap<PathBuf, FileEntry>,
    definers: BTreeMap<ConfigKey, BTreeSet<PathBuf>>,
    clock: u64,
}

impl Index {
    /// Records what `path` now holds.
    pub fn update(&mut self, path: &Path, read: FileRead) -> Outcome {
        let old = self.files.remove(path).unwrap_or_default();
        let mut out = Outcome::default();
        let source = path.display().to_string();
        let entry = match read {
            FileRead::Removed => None,
            FileRead::Unreadable(reason) => {
                let rejection = Rejection::unreadable(&source, reason);
                out.rejections.push(rejection.clone());
                Some(FileEntry {
                    objects: old.objects.clone(),
                    rejections: vec![rejection],
                    warnings: old.warnings.clone(),
                    unidentified: true,
                })
            }
            FileRead::Parsed(results) => Some(self.parsed(&old, results, &mut out)),
        };
        out.touched.extend(old.objects.keys().cloned());
        for key in old.objects.keys() {
            if let Some(files) = self.definers.get_mut(key) {
                files.remove(path);
                if files.is_empty() {
                    self.definers.remove(key);
                }
            }
        }
        if let Some(entry) = entry {
            for key in entry.objects.keys() {
                out.touched.insert(key.clone());
                self.definers
                    .entry(key.clone())
                    .or_default()
                    .insert(path.to_path_buf());
            }
            self.files.insert(path.to_path_buf(), entry);
        }
        out
    }

    fn parsed(
        &mut self,
        old: &FileEntry,
        results: Vec<Result<Parsed, ParseError>>,
        out: &mut Outcome,
    ) -> FileEntry {
        let mut entry = FileEntry::default();
        let mut rejected = BTreeSet::new();
        for result in results {
            match result {
                Ok(parsed) => {
                    let object = parsed.config.key();
                    let warnings = Warning::of(&parsed);
                    out.warnings.extend(warnings.iter().cloned());
                    entry.warnings.extend(warnings);
                    let written = match old.objects.get(&object) {
                        Some(c) if c.config.same_content(&parsed.config) => c.written,
                        _ => self.tick(),
                    };
                    let contribution = Contribution {
                        config: parsed.config,
                        written,
                    };
                    entry.objects.insert(object, contribution);
                }
                Err(error) => {
                    let rejection = Rejection::from_parse(&error);
                    match &rejection.target {
                        Target::Object(key) => {
                            rejected.insert(key.clone());
                        }
                        Target::Unknown => entry.unidentified = true,
                        Target::OtherKind => {}
                    }
                    out.rejections.push(rejection.clone());
                    entry.rejections.push(rejection);
                }
            }
        }
        for (key, earlier) in &old.objects {
            let keep = entry.unidentified || rejected.contains(key);
            if keep && !entry.objects.contains_key(key) {
                entry.objects.insert(key.clone(), earlier.clone());
                // The earlier version is served: so are its warnings.
                let kept = old
                    .warnings
                    .iter()
                    .filter(|w| w.key.as_ref() == Some(key))
                    .cloned();
                entry.warnings.extend(kept);
            }
        }
        entry
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// The version of `key` to serve: the latest written by any file defining it.
    pub fn effective(&self, key: &ConfigKey) -> Option<&Config> {
        self.definers
            .get(key)?
            .iter()
            .filter_map(|path| self.files.get(path)?.objects.get(key))
            .max_by_key(|c| c.written)
            .map(|c| &c.config)
    }

    /// Every file the index knows.
    pub fn files(&self) -> impl Iterator<Item = &Path> {
        self.files.keys().map(PathBuf::as_path)
    }

    /// Objects some file currently rejects (their earlier version, if any, is kept).
    pub fn is_rejected(&self, key: &ConfigKey) -> bool {
        self.files.values().any(|f| {
            f.rejections
                .iter()
                .any(|r| matches!(&r.target, Target::Object(k) if k == key))
        })
    }

    /// Files whose failure names no object, so their objects are unknown.
    pub fn unidentified_files(&self) -> Vec<&Path> {
        self.files
            .iter()
            .filter(|(_, f)| f.unidentified)
            .map(|(p, _)| p.as_path())
            .collect()
    }

    /// Every current warning of the objects files define, by file and line.
    pub fn warnings(&self) -> Vec<Warning> {
        self.files
            .values()
            .flat_map(|f| f.warnings.iter().cloned())
            .collect()
    }

    /// Every current rejection, by file and line.
    pub fn rejections(&self) -> Vec<Rejection> {
        self.files
            .values()
            .flat_map(|f| f.rejections.iter().cloned())
            .collect()
    }
}

#[cfg(test)]
mod tests;
