use super::*;
use shoal_proto::config::parse::parse_documents;
use shoal_proto::config::{Kind, Spec};

fn read(path: &str, yaml: &str) -> FileRead {
    FileRead::Parsed(parse_documents(path, yaml))
}

fn vs(name: &str, host: &str) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata:\n  name: {name}\n  namespace: shop\nspec:\n  hosts: [{host}]\n  http:\n  - route:\n    - destination:\n        host: {host}\n"
    )
}

fn bad_vs(name: &str) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata:\n  name: {name}\n  namespace: shop\nspec:\n  http: []\n"
    )
}

const BROKEN: &str = "apiVersion: v1\nkind: [\n";

fn key(name: &str) -> ConfigKey {
    ConfigKey::new(Kind::VirtualService, "shop", name)
}

fn host(index: &Index, name: &str) -> Option<String> {
    match &index.effective(&key(name))?.spec {
        Spec::VirtualService(vs) => Some(vs.hosts[0].clone()),
        _ => None,
    }
}

fn both(a: &str, b: &str) -> String {
    format!("{a}---\n{b}")
}

#[test]
fn add_edit_remove() {
    let mut index = Index::default();
    let p = Path::new("/c/a.yaml");
    let out = index.update(p, read("/c/a.yaml", &vs("r", "a")));
    assert_eq!(out.touched, BTreeSet::from([key("r")]));
    assert_eq!(host(&index, "r").as_deref(), Some("a"));

    index.update(p, read("/c/a.yaml", &vs("r", "b")));
    assert_eq!(host(&index, "r").as_deref(), Some("b"));

    let out = index.update(p, FileRead::Removed);
    assert_eq!(out.touched, BTreeSet::from([key("r")]));
    assert_eq!(host(&index, "r"), None);
    assert_eq!(index.files().count(), 0);
}

#[test]
fn object_missing_from_a_parsed_file_is_deleted() {
    let mut index = Index::default();
    let p = Path::new("a.yaml");
    index.update(p, read("a.yaml", &both(&vs("r1", "a"), &vs("r2", "b"))));
    let out = index.update(p, read("a.yaml", &vs("r1", "a")));
    assert!(out.touched.contains(&key("r2")));
    assert_eq!(host(&index, "r2"), None);
    assert_eq!(host(&index, "r1").as_deref(), Some("a"));
}

#[test]
fn rejected_object_keeps_its_earlier_version() {
    let mut index = Index::default();
    let p = Path::new("a.yaml");
    index.update(p, read("a.yaml", &both(&vs("r1", "a"), &vs("r2", "b"))));
    let out = index.update(p, read("a.yaml", &both(&bad_vs("r1"), &vs("r2", "c"))));
    assert_eq!(out.rejections.len(), 1);
    assert_eq!(out.rejections[0].object, "VirtualService shop/r1");
    assert_eq!(out.rejections[0].kind, "VirtualService");
    assert_eq!(
        host(&index, "r1").as_deref(),
        Some("a"),
        "earlier version kept"
    );
    assert_eq!(
        host(&index, "r2").as_deref(),
        Some("c"),
        "valid edit applied"
    );
    assert!(index.is_rejected(&key("r1")));
    assert_eq!(index.rejections().len(), 1);

    // Fixed: the rejection clears and the new version is served.
    let out = index.update(p, read("a.yaml", &both(&vs("r1", "z"), &vs("r2", "c"))));
    assert!(out.rejections.is_empty());
    assert_eq!(host(&index, "r1").as_deref(), Some("z"));
    assert!(!index.is_rejected(&key("r1")));
    assert!(index.rejections().is_empty());
}

#[test]
fn new_invalid_object_is_only_rejected() {
    let mut index = Index::default();
    let out = index.update(Path::new("a.yaml"), read("a.yaml", &bad_vs("r")));
    assert_eq!(out.rejections.len(), 1);
    assert!(out.touched.is_empty());
    assert_eq!(host(&index, "r"), None);
}

#[test]
fn unidentified_failure_keeps_every_object_the_file_had() {
    let mut index = Index::default();
    let p = Path::new("a.yaml");
    index.update(p, read("a.yaml", &both(&vs("r1", "a"), &vs("r2", "b"))));
    // r2 vanished, r1 changed, and a document nobody can name appeared: r1's change is
    // applied, r2 is kept (it may be the broken document).
    let out = index.update(p, read("a.yaml", &both(&vs("r1", "x"), BROKEN)));
    assert_eq!(out.rejections.len(), 1);
    assert_eq!(out.rejections[0].kind, "unknown");
    assert_eq!(host(&index, "r1").as_deref(), Some("x"));
    assert_eq!(host(&index, "r2").as_deref(), Some("b"));
    assert_eq!(index.unidentified_files(), [p]);

    // Repaired without r2: now it goes.
    index.update(p, read("a.yaml", &vs("r1", "x")));
    assert_eq!(host(&index, "r2"), None);
    assert!(index.unidentified_files().is_empty());
}

#[test]
fn unreadable_file_keeps_everything() {
    let mut index = Index::default();
    let p = Path::new("a.yaml");
    index.update(p, read("a.yaml", &vs("r", "a")));
    let out = index.update(p, FileRead::Unreadable("permission denied".into()));
    assert_eq!(out.rejections.len(), 1);
    assert!(out.rejections[0].reason.contains("permission denied"));
    assert_eq!(host(&index, "r").as_deref(), Some("a"));
}

#[test]
fn same_key_in_two_files_last_write_wins() {
    let mut index = Index::default();
    let (a, b) = (Path::new("a.yaml"), Path::new("b.yaml"));
    index.update(a, read("a.yaml", &vs("r", "from-a")));
    index.update(b, read("b.yaml", &vs("r", "from-b")));
    assert_eq!(host(&index, "r").as_deref(), Some("from-b"));

    // Re-reading a with the same content does not make it the latest write.
    index.update(a, read("a.yaml", &vs("r", "from-a")));
    assert_eq!(host(&index, "r").as_deref(), Some("from-b"));

    // Editing it does.
    index.update(a, read("a.yaml", &vs("r", "from-a2")));
    assert_eq!(host(&index, "r").as_deref(), Some("from-a2"));

    // Deleting the latest writer falls back to the other file.
    index.update(a, FileRead::Removed);
    assert_eq!(host(&index, "r").as_deref(), Some("from-b"));

    // Deleted only once no file defines it.
    index.update(b, read("b.yaml", &vs("other", "x")));
    assert_eq!(host(&index, "r"), None);
}

#[test]
fn rejection_in_one_file_does_not_hide_another_files_version() {
    let mut index = Index::default();
    let (a, b) = (Path::new("a.yaml"), Path::new("b.yaml"));
    index.update(a, read("a.yaml", &vs("r", "from-a")));
    index.update(b, read("b.yaml", &bad_vs("r")));
    assert_eq!(host(&index, "r").as_deref(), Some("from-a"));
    assert!(index.is_rejected(&key("r")));
}

#[test]
fn warnings_are_located() {
    let mut index = Index::default();
    let slice = "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: s\n  namespace: shop\naddressType: IPv4\n";
    let out = index.update(Path::new("e.yaml"), read("e.yaml", slice));
    assert_eq!(out.warnings.len(), 1);
    let warning = out.warnings[0].to_string();
    assert!(
        warning.starts_with("e.yaml:1: EndpointSlice shop/s: "),
        "{warning}"
    );
    assert_eq!(index.warnings(), out.warnings);
}

/// A VirtualService with a field Shoal does not implement: accepted, with a warning.
fn vs_with_unknown_field(name: &str) -> String {
    format!("{}    mirrorPolicy: {{}}\n", vs(name, "a"))
}

#[test]
fn warnings_follow_the_served_version() {
    let mut index = Index::default();
    let path = Path::new("w.yaml");
    index.update(path, read("w.yaml", &vs_with_unknown_field("r")));
    let warnings = index.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0].kind, "VirtualService");
    assert!(
        warnings[0].warning.contains("spec.http[0].mirrorPolicy"),
        "{warnings:?}"
    );

    // Rejected: the earlier version, and its warning, stay.
    index.update(path, read("w.yaml", &bad_vs("r")));
    assert_eq!(index.warnings(), warnings);

    // Fixed: no warning left; the file removed: none either way.
    index.update(path, read("w.yaml", &vs("r", "a")));
    assert!(index.warnings().is_empty());
    index.update(path, read("w.yaml", &vs_with_unknown_field("r")));
    index.update(path, FileRead::Removed);
    assert!(index.warnings().is_empty());
}
